import type { Notifier } from "../core";
import type { Storage } from "../storage/storage";

/**
 * Wakes live event streams when this process commits events. Write paths call `ping` once their
 * events are committed; a stream's reader then reads the trail again (through eventsAfter, like any
 * reader). A ping carries no event: it only says "look now", so a missed or extra ping costs a
 * read or a poll interval, never an event. Events written by other replicas are found by polling.
 */
export class CommitNotifier implements Notifier {
  private readonly byNamespace = new Map<string, Set<() => void>>();
  private readonly everywhere = new Set<(scrubbed: boolean) => void>();

  /** Calls `wake` after every ping, whatever its namespace (with the ping's `scrubbed`); returns the unsubscribe. */
  subscribeAll(wake: (scrubbed: boolean) => void): () => void {
    this.everywhere.add(wake);
    return () => this.everywhere.delete(wake);
  }

  /** Calls `wake` after every ping of `namespace` (or of all namespaces); returns the unsubscribe. */
  subscribe(namespace: string, wake: () => void): () => void {
    let set = this.byNamespace.get(namespace);
    if (!set) {
      set = new Set();
      this.byNamespace.set(namespace, set);
    }
    set.add(wake);
    return () => {
      set.delete(wake);
      if (set.size === 0 && this.byNamespace.get(namespace) === set) this.byNamespace.delete(namespace);
    };
  }

  /** Whether any stream listens (pings without one do nothing). */
  get listening() {
    return this.byNamespace.size > 0 || this.everywhere.size > 0;
  }

  /**
   * Events of `namespace` were committed; without a namespace (e.g. a sweep over many), wakes every
   * stream. `scrubbed`: the commit may have changed events already in the trail (an erasure, an import).
   */
  ping(namespace?: string, scrubbed = false) {
    if (!this.listening) return;
    for (const wake of this.everywhere) wake(scrubbed);
    if (namespace === undefined) {
      for (const set of this.byNamespace.values()) for (const wake of set) wake();
      return;
    }
    const set = this.byNamespace.get(namespace);
    if (set) for (const wake of set) wake();
  }
}

/**
 * The storage with every `apply` followed by a ping of the namespaces it wrote events in, so
 * every write path, present or future, wakes the streams without remembering to.
 */
export function notifyingStorage(storage: Storage, notifier: CommitNotifier): Storage {
  const apply: Storage["apply"] = async (ops, actorKeyId, now, idempotency) => {
    const done = await storage.apply(ops, actorKeyId, now, idempotency);
    if (!notifier.listening) return done;
    const namespaces = new Set<string>();
    for (const d of done) if (d) namespaces.add(d.event.namespace);
    for (const ns of namespaces) notifier.ping(ns);
    return done;
  };
  const erase: Storage["erase"] = async (namespace, entity, actorKeyId, now) => {
    const done = await storage.erase(namespace, entity, actorKeyId, now);
    notifier.ping(namespace, true);
    return done;
  };
  const importRecords: Storage["importRecords"] = async (records, options) => {
    const done = await storage.importRecords(records, options);
    notifier.ping(undefined, true);
    return done;
  };
  return Object.assign(Object.create(storage), { apply, erase, importRecords });
}
