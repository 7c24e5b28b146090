import { CommitNotifier } from "../audit/notify";
import type { Config } from "../config/config";
import { embedSettings } from "../embedding/client";
import { embedPendingBatch } from "../embedding/worker";
import { createLogger } from "../log";
import { openStorage, storageSite } from "../storage/index";

/**
 * `memd reindex`: rebuilds the keyword index from the current memories and, with an embedding
 * model configured, embeds every current memory again. For upgrades and repairs. It holds the
 * store alone (on LMDB, the data dir lock), so it never runs beside a server. Returns the exit code.
 */
export async function reindex(config: Config, out: (line: string) => void): Promise<number> {
  const logger = createLogger("warn");
  let release: () => void;
  try {
    release = await storageSite(config).holdAlone();
  } catch (e) {
    out(`memd: reindex: ${(e as Error).message}`);
    return 1;
  }
  // Rebuilding a large index takes statements far longer than a request's (100,000 memories:
  // ~13 s on PostgreSQL): an hour each, unless the operator set more.
  const storage = await openStorage({
    ...config,
    dbStatementTimeoutMs: Math.max(config.dbStatementTimeoutMs, 3_600_000),
    // (No background keyword snapshots in a command: the server writes them.)
    keywordPrebuild: 0,
  });
  try {
    const core = { storage, config, logger, notifier: new CommitNotifier() };
    const embed = embedSettings(config) !== undefined;
    const n = await storage.rebuildSearchIndex({ embeddings: embed });
    out(`memd: keyword index rebuilt from ${n} current memories`);
    if (!embed) {
      out("memd: no embedder (--embedder none and no MEMD_EMBED_BASE_URL); vectors left as they are");
      return 0;
    }
    let embedded = 0;
    for (;;) {
      const done = await embedPendingBatch(core);
      if (done === 0) break;
      embedded += done;
    }
    out(`memd: embedded ${embedded} memories`);
    return 0;
  } catch (e) {
    out(`memd: reindex failed: ${(e as Error).message}`);
    return 1;
  } finally {
    await storage.close();
    release();
  }
}
