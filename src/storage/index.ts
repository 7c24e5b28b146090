// Picks the storage backend from the settings: PostgreSQL when a database URL is given, else
// LMDB in the data dir.
import { openLmdb } from "./lmdb/index";
import { openPostgres } from "./postgres/index";
import type { Storage } from "./storage";

export interface StorageSettings {
  dataDir: string;
  mapSizeMb?: number;
  databaseUrl?: string;
  dbPool?: number;
  databasePooler?: "none" | "session" | "transaction";
  dbConnectTimeoutMs?: number;
  dbStatementTimeoutMs?: number;
}

/** Opens the configured storage, migrating it to this release's format. */
export async function openStorage(s: StorageSettings): Promise<Storage> {
  if (s.databaseUrl) {
    return openPostgres({
      url: s.databaseUrl,
      pool: s.dbPool ?? 10,
      pooler: s.databasePooler ?? "none",
      connectTimeoutMs: s.dbConnectTimeoutMs ?? 5000,
      statementTimeoutMs: s.dbStatementTimeoutMs ?? 5000,
    });
  }
  return openLmdb(s.dataDir, { mapSizeMb: s.mapSizeMb });
}
