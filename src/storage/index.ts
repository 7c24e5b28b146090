// Picks the storage backend from the settings: PostgreSQL when a database URL is given, else
// LMDB in the data dir. What differs between them at start-up (where the data lives, what must
// be held while it is open) is told by storageSite, so the server never asks which one it has.
import { accessSync, constants, mkdirSync, statSync } from "node:fs";
import { resolve } from "node:path";
import { openLmdb } from "./lmdb/index";
import { lockDataDir } from "./lock";
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
  pgKeywordLists?: boolean;
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
      keywordLists: s.pgKeywordLists ?? true,
    });
  }
  return openLmdb(s.dataDir, { mapSizeMb: s.mapSizeMb });
}

/** Where the configured storage lives, and what holding it takes besides opening it. */
export interface StorageSite {
  /** Where the data lives, for logs: the data dir, or the database host (never the password). */
  readonly name: { dataDir: string } | { database: string };
  /** The command-line option that names this store in a printed command (never a password). */
  readonly option: string;
  /** How a failure to open it is introduced to the operator. */
  readonly openFailure: string;
  /**
   * Takes what this process must hold while the store is open, before opening it: LMDB's data
   * dir, created if needed, checked to be a writable directory and locked (the lock is LMDB's:
   * on PostgreSQL any number of replicas share the database, and there is nothing to take).
   * Throws with a one-line reason; returns the release.
   */
  claim(warn: (msg: string) => void): Promise<() => void>;
}

export function storageSite(s: StorageSettings): StorageSite {
  if (s.databaseUrl) {
    const u = new URL(s.databaseUrl);
    return {
      name: { database: `postgres://${u.host}${u.pathname}` },
      option: `--database-url "$MEMD_DATABASE_URL"`,
      openFailure: "database",
      claim: async () => () => {},
    };
  }
  const quoted = (x: string) => (/^[\w@%+=:,./-]+$/.test(x) ? x : `'${x.replaceAll("'", `'\\''`)}'`);
  return {
    name: { dataDir: s.dataDir },
    option: `--data-dir ${quoted(resolve(s.dataDir))}`,
    openFailure: `data dir ${s.dataDir}: cannot open the store`,
    async claim(warn) {
      prepareDataDir(s.dataDir);
      const lock = await lockDataDir(s.dataDir, warn);
      return () => lock.release();
    },
  };
}

/** Creates the data dir if needed and checks it is a writable directory; a one-line error otherwise. */
export function prepareDataDir(dataDir: string) {
  const fail = (cause: string) => new Error(`data dir ${dataDir}: ${cause}`);
  try {
    mkdirSync(dataDir, { recursive: true });
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === "EEXIST" || code === "ENOTDIR") throw fail("is a file, not a directory");
    if (code === "EACCES" || code === "EPERM") throw fail("cannot be created: permission denied");
    if (code === "EROFS") throw fail("cannot be created: read-only file system");
    if (code === "ENOENT") throw fail("cannot be created: its parent cannot be made");
    throw fail(`cannot be created: ${(e as Error).message}`);
  }
  if (!statSync(dataDir).isDirectory()) throw fail("is a file, not a directory");
  try {
    accessSync(dataDir, constants.W_OK | constants.X_OK);
  } catch {
    throw fail("is not writable: permission denied");
  }
}
