import type { Config } from "./config/config";
import type { Logger } from "./log";
import type { Storage } from "./storage/storage";

/**
 * Wakes live event streams after this process commits (audit/notify.ts's CommitNotifier), as a
 * feature sees it: declared here so that this bottom layer names no feature's types.
 */
export interface Notifier {
  /** Calls `wake` after every commit of `namespace`; returns the unsubscribe. */
  subscribe(namespace: string, wake: () => void): () => void;
  /**
   * Calls `wake` after every commit of any namespace (webhook delivery), `scrubbed` when it may
   * have changed events already in the trail (an erasure scrubs them; an import); returns the unsubscribe.
   */
  subscribeAll(wake: (scrubbed: boolean) => void): () => void;
}

/**
 * What every feature service needs: the open storage, the commit notifier, settings and the log.
 * `S` is the storage roles a service uses (storage/storage.ts): a service that needs only some
 * says which, `Core<Search & AsOfReads>`, and the server's whole Core is one of those.
 */
export interface Core<S = Storage> {
  storage: S;
  /** Pinged after events are committed, to wake live streams (see audit/notify.ts). */
  notifier: Notifier;
  config: Config;
  logger: Logger;
  /** Aborted when the shutdown grace ends: model and embedding calls in flight stop (503 shutting_down). */
  shutdown?: AbortSignal;
}
