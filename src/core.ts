import type { EventClock } from "./audit/service";
import type { Config } from "./config/config";
import type { Logger } from "./log";
import type { Store } from "./storage/store";

/** What every feature service needs: the open store, the event clock, settings and the log. */
export interface Core {
  store: Store;
  clock: EventClock;
  config: Config;
  logger: Logger;
}
