import { type Database, type Key, open, type RootDatabase } from "lmdb";
import { ApiError } from "../http/errors";

/**
 * The LMDB environment and its sub-databases. Every name lives here, once.
 *
 * Key layout (lmdb-js tuple keys; ordered-binary compares arrays element by element, numbers
 * are big-endian so byte order is numeric order, and elements are joined by a 0x00 byte):
 *
 *   memories          [memoryId]                          -> MemoryRecord (kept after delete, with its state)
 *   entity_memories   [namespace, entity, memoryId]       -> null  (current memories of an entity)
 *   expiries          [expiresAtMs, memoryId]             -> null  (what the TTL sweeper deletes next)
 *   events            seq                                 -> EventRecord  (seq: global, strictly increasing)
 *   events_by_ns      [namespace, atMs, seq]              -> null
 *   events_by_entity  [namespace, entity, atMs, seq]      -> null
 *   events_by_memory  [namespace, memoryId, atMs, seq]    -> null  (a REPLACE is listed under both memories)
 *   api_keys          [keyId]                             -> KeyRecord (hash of the secret, never the secret)
 *   api_key_hashes    [sha256 hex]                        -> keyId
 *
 * Namespaces and entities may not hold control characters, so no string part contains the 0x00
 * separator and two different (namespace, entity) pairs can never share a range. Event times are
 * strictly increasing per namespace (see audit/clock.ts), so "after time T" is a plain range scan
 * and the event indexes are written in the same transaction as the record they point to.
 */
export const dbNames = {
  memories: "memories",
  entityMemories: "entity_memories",
  expiries: "expiries",
  events: "events",
  eventsByNs: "events_by_ns",
  eventsByEntity: "events_by_entity",
  eventsByMemory: "events_by_memory",
  apiKeys: "api_keys",
  apiKeyHashes: "api_key_hashes",
} as const;

/** Greater than any number or string without U+FFFF, so `[...prefix, END]` closes a prefix range. */
export const END = "\uffff";

export interface Store {
  env: RootDatabase;
  dbs: Record<keyof typeof dbNames, Database>;
  /** Resolves once everything committed so far is on disk, not merely committed. */
  flushed(): Promise<void>;
  close(): Promise<void>;
}

export interface StoreOptions {
  mapSizeMb?: number;
}

/** Opens (creating if needed) the store in `dataDir`. */
export function openStore(dataDir: string, options: StoreOptions = {}): Store {
  const env = open({
    path: dataDir,
    mapSize: (options.mapSizeMb ?? 65536) * 1024 * 1024,
    maxDbs: 16,
    // lmdb-js guesses "a file, not a directory" from a dot in the name (e.g. memd-data.v2): never.
    noSubdir: false,
    // Commits share one fsync batch (group commit); 2xx answers wait for env.flushed.
    overlappingSync: true,
  });
  const dbs = Object.fromEntries(Object.entries(dbNames).map(([k, name]) => [k, env.openDB(name, {})])) as Store["dbs"];
  return {
    env,
    dbs,
    flushed: () => Promise.resolve(env.flushed).then(() => undefined),
    close: () => env.close(),
  };
}

/** Puts and removes staged by a write plan; applied together once the plan has finished. */
export class Writes {
  private readonly ops: [db: Database, key: unknown, value: unknown, remove: boolean][] = [];
  put(db: Database, key: unknown, value: unknown) {
    this.ops.push([db, key, value, false]);
  }
  remove(db: Database, key: unknown) {
    this.ops.push([db, key, undefined, true]);
  }
  /** Applies the staged writes inside the current write transaction. */
  apply() {
    for (const [db, key, value, remove] of this.ops) {
      if (remove) db.removeSync(key as Key);
      else db.putSync(key as Key, value);
    }
  }
}

/**
 * Runs `plan` inside one LMDB write transaction (batched with concurrent ones into a shared
 * commit) and resolves with its result once the commit is flushed to disk. `plan` reads the
 * store as it is and stages its changes in `w`; they are applied only if it returns, so a plan
 * that throws writes nothing. Staging instead of a child transaction keeps "both or neither"
 * at a quarter of the cost per request. A plan does not see its own staged writes.
 */
export async function writeDurably<T>(store: Store, plan: (w: Writes) => T): Promise<T> {
  let result: T | undefined;
  let failure: unknown;
  try {
    await store.env.transaction(() => {
      const w = new Writes();
      try {
        result = plan(w);
      } catch (e) {
        failure = e;
        return;
      }
      w.apply();
    });
    if (failure === undefined) await store.flushed();
  } catch (e) {
    throw storageError(e);
  }
  if (failure !== undefined) throw failure;
  return result as T;
}

function storageError(e: unknown): unknown {
  const message = String((e as Error)?.message ?? e);
  if (/MDB_MAP_FULL|ENOSPC|No space left/i.test(message))
    return new ApiError("storage_full", "the store is full; raise --map-size-mb or free disk space");
  return e;
}
