// Picks the storage backend from the settings: PostgreSQL when a database URL is given, else
// LMDB in the data dir. What differs between them outside the storage roles (where the data
// lives, what must be held while it is open, what the commands backup and compact do) is told by
// storageSite, so neither the server nor a command ever asks which one it has.
import { accessSync, constants, existsSync, mkdirSync, statSync } from "node:fs";
import { resolve } from "node:path";
import { backupStore } from "./lmdb/backup";
import { compactStore } from "./lmdb/compact";
import { openLmdb } from "./lmdb/index";
import { lockDataDir } from "./lock";
import { postgresBackupAdvice, postgresCompactAdvice } from "./postgres/advice";
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
  /** PostgreSQL: search snapshots in the database of namespaces of at least this many memories (0: off). */
  pgSnapshotFrom?: number;
  /** LMDB: background keyword snapshots of namespaces of at least this many memories (0: off). */
  keywordPrebuild?: number;
  /** The search-memory budget in MiB (search-memory.ts); unset: 256. */
  searchMemoryMb?: number;
  /** PostgreSQL: the connections' application_name (pg_stat_activity); unset: memd. */
  applicationName?: string;
}

/** Opens the configured storage, migrating it to this release's format. */
export async function openStorage(
  s: StorageSettings,
  log?: (msg: string, fields: Record<string, unknown>) => void,
): Promise<Storage> {
  if (s.databaseUrl) {
    return openPostgres({
      url: s.databaseUrl,
      pool: s.dbPool ?? 10,
      pooler: s.databasePooler ?? "none",
      connectTimeoutMs: s.dbConnectTimeoutMs ?? 5000,
      statementTimeoutMs: s.dbStatementTimeoutMs ?? 5000,
      keywordLists: s.pgKeywordLists ?? true,
      snapshotFrom: s.pgSnapshotFrom,
      searchMemoryMb: s.searchMemoryMb,
      applicationName: s.applicationName,
    });
  }
  return openLmdb(s.dataDir, {
    mapSizeMb: s.mapSizeMb,
    keywordPrebuild: s.keywordPrebuild,
    searchMemoryMb: s.searchMemoryMb,
    log,
  });
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
  /** Where the store is, in a command's messages: LMDB's data dir (absolute), or "PostgreSQL". */
  readonly label: string;
  /**
   * Why a command that works on an existing store cannot (LMDB: there is no data dir where the
   * settings say; pass another), or undefined: a database is always there to connect to.
   */
  missing(): string | undefined;
  /** Opens the store for a command (keys, export, import); `create` makes LMDB's data dir first. */
  open(create?: boolean): Promise<Storage>;
  /**
   * Holds the store for a command that must not run beside a server (memd reindex): LMDB's data
   * dir lock, on a data dir that must exist (nothing is created); nothing on PostgreSQL. Returns
   * the release.
   */
  holdAlone(): Promise<() => void>;
  /**
   * memd backup: a consistent copy of the store in the new directory `dest`, safe while a server
   * runs (LMDB's copy in one read transaction). On PostgreSQL it throws ToolAdvice: the
   * database's own tools make the copy.
   */
  backup(dest: string): Promise<void>;
  /**
   * memd compact: rewrites a stopped LMDB store without its free pages, and returns its sizes
   * before and after in bytes; on PostgreSQL, returns what the operator runs instead (`advice`).
   */
  compact(): Promise<{ before: number; after: number } | { advice: string }>;
}

/** Thrown where the database's own tools do what a memd command does on LMDB; the message says which. */
export class ToolAdvice extends Error {}

export function storageSite(s: StorageSettings): StorageSite {
  if (s.databaseUrl) {
    const u = new URL(s.databaseUrl);
    return {
      name: { database: `postgres://${u.host}${u.pathname}` },
      option: `--database-url "$MEMD_DATABASE_URL"`,
      openFailure: "database",
      claim: async () => () => {},
      label: "PostgreSQL",
      missing: () => undefined,
      // (A command neither reads the search snapshots at start nor writes any: the server does.)
      open: () => openStorage({ ...s, pgSnapshotFrom: 0 }),
      holdAlone: async () => () => {},
      backup: async () => {
        throw new ToolAdvice(postgresBackupAdvice);
      },
      compact: async () => ({ advice: postgresCompactAdvice }),
    };
  }
  const dir = resolve(s.dataDir);
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
    label: dir,
    missing: () => (existsSync(dir) ? undefined : `no data dir at ${dir}; pass --data-dir or set MEMD_DATA_DIR`),
    open(create = false) {
      if (create) mkdirSync(dir, { recursive: true });
      // (A command writes no keyword snapshots in the background: the server does.)
      return openStorage({ ...s, dataDir: dir, keywordPrebuild: 0 });
    },
    async holdAlone() {
      const lock = await lockDataDir(s.dataDir);
      return () => lock.release();
    },
    backup: (dest) => backupStore(s.dataDir, dest),
    compact: () => compactStore(dir),
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
