import type { CommitNotifier } from "./audit/notify";
import type { EventClock } from "./audit/service";
import type { Config } from "./config/config";
import type { Logger } from "./log";
import type { Store } from "./storage/store";

/** What every feature service needs: the open store, the event clock, the commit notifier, settings and the log. */
export interface Core {
  store: Store;
  clock: EventClock;
  /** Pinged after events are committed, to wake live streams (see audit/notify.ts). */
  notifier: CommitNotifier;
  config: Config;
  logger: Logger;
}
