import { buildApp } from "./app";
import { commit, version } from "./build-info";
import type { Config } from "./config/config";
import type { Core } from "./core";
import { embedStats } from "./embedding/client";
import { startEmbedWorker } from "./embedding/worker";
import { createSmartStore, modelStats } from "./extraction/service";
import type { KeyRecord } from "./keys/model";
import { createKey, hasStoredKeys, rootKeyFromSecret } from "./keys/service";
import { createLogger } from "./log";
import { startTtlSweeper } from "./memory/ttl";
import { openStorage } from "./storage/index";

/** Where the data lives, for logs: the data dir, or the database host (never the password). */
export function storageName(config: Config): { dataDir: string } | { database: string } {
  if (!config.databaseUrl) return { dataDir: config.dataDir };
  const u = new URL(config.databaseUrl);
  return { database: `postgres://${u.host}${u.pathname}` };
}

export interface Running {
  url: string;
  port: number;
  core: Core;
  stop(): Promise<void>;
}

/**
 * Opens the store, makes sure a root key exists, and starts listening. On first start with no
 * MEMD_API_KEY and no stored key, a root key is created and printed once on stderr.
 */
export async function startServer(
  config: Config,
  printSecret: (text: string) => void = (t) => process.stderr.write(t),
  writeLog?: (line: string) => void,
): Promise<Running> {
  const logger = createLogger(config.logLevel, writeLog);
  const storage = await openStorage(config);
  const core: Core = { storage, config, logger };

  let root: KeyRecord | undefined;
  if (config.apiKey) root = rootKeyFromSecret(config.apiKey);
  else if (!(await hasStoredKeys(storage))) {
    const { key, secret } = await createKey(storage, { name: "root", permission: "admin", namespaces: ["*"] });
    printSecret(
      `\nmemd: created a root key (${key.id}); it is shown only this once:\n\n  ${secret}\n\n` +
        `Use it as: curl -H "Authorization: Bearer ${secret}" http://${config.host}:${config.port}/v1/...\n\n`,
    );
  }

  const app = buildApp(core, { root, smartStore: createSmartStore(core), modelStats, embedStats });
  const stopSweeper = startTtlSweeper(core);
  const stopEmbedder = startEmbedWorker(core);
  app.listen({ hostname: config.host, port: config.port, maxRequestBodySize: 2 * 1024 * 1024 });
  const port = app.server!.port!;
  const url = `http://${config.host}:${port}`;
  logger.info("memd started", { version, commit, ...storageName(config), address: url });

  let stopping: Promise<void> | undefined;
  const stop = () =>
    (stopping ??= (async () => {
      // Stop accepting, let requests in flight finish, then close LMDB.
      await app.server?.stop(false);
      await stopSweeper();
      await stopEmbedder();
      await storage.close();
      logger.info("memd stopped", { version, ...storageName(config) });
      logger.flush();
    })());
  return { url, port, core, stop };
}
