import type { Config } from "./config/config";
import type { Logger } from "./log";
import type { Storage } from "./storage/storage";

/** What every feature service needs: the open storage, settings and the log. */
export interface Core {
  storage: Storage;
  config: Config;
  logger: Logger;
}
