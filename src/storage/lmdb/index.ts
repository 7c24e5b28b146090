// The LMDB backend: one embedded environment in the data dir. Reads are synchronous; every
// write is one transaction batched with concurrent ones into a shared commit (group commit), and
// resolves only after that commit is flushed to disk. This file opens the environment, builds
// the state every role shares (state.ts) and assembles the roles, one file each.
import type { RootDatabase } from "lmdb";
import { keyedMutex } from "../mutex";
import { SearchMemory } from "../search-memory";
import type { Storage } from "../storage";
import { lmdbAsOf } from "./asof";
import { lmdbBrowse } from "./browse";
import { EventClock } from "./clock";
import { lmdbEmbeddings } from "./embeddings";
import { EntityLists } from "./entity-lists";
import { type LmdbOptions, openEnv } from "./env";
import { lmdbErasure } from "./erasure";
import { lmdbEvents } from "./events";
import { lmdbIdempotency } from "./idempotency";
import { lmdbKeys } from "./keys";
import { keywordCache } from "./keyword-cache";
import type { Dbs } from "./layout";
import { lmdbMemories } from "./memories";
import { migrate } from "./migrate";
import { lmdbSearch } from "./search";
import type { Writes } from "./staging";
import { type LmdbState, settledSeq } from "./state";
import { lmdbTransfer } from "./transfer";
import { lmdbUpkeep } from "./upkeep";
import { vectorCache } from "./vector-cache";
import { lmdbWebhooks } from "./webhooks";
import { write } from "./writes";

export { FORMAT_VERSION } from "./layout";
export type { Dbs, LmdbOptions };
export { openEnv };

export interface LmdbStorage extends Storage {
  readonly backend: "lmdb";
  readonly env: RootDatabase;
  readonly dbs: Dbs;
  /** Runs a write plan durably (see writeDurably); for backend-level tools such as bulk loads. */
  write<T>(plan: (w: Writes) => T): Promise<T>;
  /** Vector snapshots read and written since the start (vector-snapshot.ts; tests and benches). */
  vectorCacheStats(): { read: number; written: number; walked: number };
}

/**
 * Opens (creating if needed) the store in `dataDir` and migrates it to this release's format.
 * A data dir written by a newer release is refused, never opened for writing.
 */
export async function openLmdb(dataDir: string, options: LmdbOptions = {}): Promise<LmdbStorage> {
  const { env, dbs } = openEnv(dataDir, options);
  try {
    await migrate(env, dbs, dataDir);
  } catch (e) {
    await env.close();
    throw e;
  }
  const searchMemory = new SearchMemory((options.searchMemoryMb ?? 256) * 1024 * 1024, { smallShare: true });
  const s: LmdbState = {
    dataDir,
    env,
    dbs,
    clock: new EventClock(dbs),
    searchMemory,
    // Vector snapshots are taken as of the settled seq too (vector-snapshot.ts).
    // Namespaces growing past vectorSnapshots.from are followed in the background (as keyword
    // lists are, with --keyword-prebuild): vector-cache.ts.
    vectorCache: vectorCache(
      dbs,
      searchMemory,
      options.searchIndex === false ? undefined : dataDir,
      () => settledSeq(s),
      (options.keywordPrebuild ?? 0) > 0,
      () => s.inflight.size === 0,
    ),
    // Keyword snapshots are taken as of the settled seq, which the state tells.
    keywordCache: keywordCache(dbs, options.searchIndex === false ? undefined : dataDir, () => settledSeq(s), {
      prebuild: options.keywordPrebuild,
      log: options.log,
      memory: searchMemory,
    }),
    entityLists: new EntityLists(dbs),
    indexOn: options.searchIndex !== false,
    entityLocks: keyedMutex(),
    pending: undefined,
    inflight: new Map(),
  };
  return {
    backend: "lmdb",
    sharedWithReplicas: false,
    env,
    dbs,
    write: (plan) => write(s, plan),
    vectorCacheStats: () => ({ ...s.vectorCache.snapshotStats }),
    ...lmdbMemories(s),
    ...lmdbEvents(s),
    ...lmdbAsOf(s),
    ...lmdbBrowse(s),
    ...lmdbSearch(s),
    ...lmdbEmbeddings(s, options.mapSizeMb),
    ...lmdbKeys(s),
    ...lmdbErasure(s),
    ...lmdbTransfer(s),
    ...lmdbIdempotency(s),
    ...lmdbWebhooks(s),
    ...lmdbUpkeep(s),
  };
}
