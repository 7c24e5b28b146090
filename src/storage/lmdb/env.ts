// Opening an LMDB environment: its sub-databases (layout.ts) and how their records are encoded.
import { closeSync, openSync, readSync } from "node:fs";
import { join } from "node:path";
import { open, type RootDatabase } from "lmdb";
import { ErasureRecord, EventRecord, IdempotencyEntry, KeyRecord, MemoryRecord } from "../records";
import { binaryDbs, type Dbs, dbNames } from "./layout";

export interface LmdbOptions {
  mapSizeMb?: number;
  /** false: the in-memory keyword lists do not follow applies (only for bench/search.ts's index-off baseline). */
  searchIndex?: boolean;
  /**
   * Namespaces of at least this many current memories get their keyword snapshot written in the
   * background, searched or not (keyword-cache.ts); unset or 0: only searched namespaces have one.
   */
  keywordPrebuild?: number;
  /** The search-memory budget in MiB (../search-memory.ts); unset: 256. */
  searchMemoryMb?: number;
  /** Where the background snapshots say when they start and finish (info). */
  log?: (msg: string, fields: Record<string, unknown>) => void;
}

/**
 * Where each msgpack sub-database keeps the field names of its records (lmdb-js shared
 * structures, format 6): a value then holds only its field values. Without it every event and
 * memory carried its own field names (an event took 233 bytes, now 127), and msgpackr defined
 * its record shape anew on every write. A symbol key lies outside every range read.
 */
export const sharedStructuresKey = Symbol.for("structures");

/**
 * The field names of the records kept in msgpack sub-databases (their schemas, storage/records.ts).
 * Only record shapes made of these are shared; any other object, such as metadata (whose keys are
 * anyone's words), defines its shape inside its own value, so that erasing the value erases its
 * keys and `memd compact` leaves none behind.
 */
const recordFields = new Set(
  [MemoryRecord, EventRecord, KeyRecord, ErasureRecord, IdempotencyEntry].flatMap((r) => Object.keys(r.properties)),
);
/** lmdb-js passes shouldShareStructure on to msgpackr; its DatabaseOptions type leaves it out. */
const msgpackOptions = {
  sharedStructuresKey,
  shouldShareStructure: (keys: string[]) => keys.every((k) => recordFields.has(k)),
};

/** Opens the LMDB environment of a data dir (no creation, no migration): for tools such as backup. */
export function openEnv(dataDir: string, options: LmdbOptions = {}): { env: RootDatabase; dbs: Dbs } {
  checkHeader(join(dataDir, "data.mdb"));
  const env = open({
    path: dataDir,
    mapSize: (options.mapSizeMb ?? 65536) * 1024 * 1024,
    maxDbs: 32,
    // lmdb-js guesses "a file, not a directory" from a dot in the name (e.g. memd-data.v2): never.
    noSubdir: false,
    // Commits share one fsync batch (group commit); 2xx answers wait for env.flushed.
    overlappingSync: true,
  });
  const dbs = Object.fromEntries(
    Object.entries(dbNames).map(([k, name]) => [
      k,
      env.openDB(name, binaryDbs.has(name) ? { encoding: "binary" } : msgpackOptions),
    ]),
  ) as Dbs;
  return { env, dbs };
}

/**
 * Refuses a data.mdb that does not start with LMDB's meta page (its magic number within the first
 * page header): the native library would crash the process on it instead of failing.
 */
function checkHeader(file: string) {
  let head: Buffer;
  try {
    const fd = openSync(file, "r");
    try {
      head = Buffer.alloc(64);
      head = head.subarray(0, readSync(fd, head, 0, 64, 0));
    } finally {
      closeSync(fd);
    }
  } catch {
    return; // no store yet (LMDB creates it), or one LMDB reports on itself
  }
  if (head.length === 0) return;
  const magic = Buffer.from([0xde, 0xc0, 0xef, 0xbe]); // MDB_MAGIC 0xBEEFC0DE, little-endian
  if (!head.includes(magic)) throw new Error(`${file} is not an LMDB store (damaged, or not written by memd)`);
}
