// The LMDB backend's state: everything its roles share, built once by index.ts and passed to
// each role's functions (nothing of it lives in a closure).
import type { RootDatabase } from "lmdb";
import type { keyedMutex } from "../mutex";
import type { MemoryRecord } from "../records";
import type { SearchMemory } from "../search-memory";
import type { Applied, IdempotencyRecord, MemoryOp } from "../storage";
import type { EventClock } from "./clock";
import type { EntityLists } from "./entity-lists";
import type { LoadedKeywordCache } from "./keyword-cache";
import type { Dbs } from "./layout";
import type { VectorCache } from "./vector-cache";

/** An apply waiting for its batch's write transaction. */
export interface Pending {
  ops: readonly MemoryOp[];
  actorKeyId: string | null;
  now: number;
  idempotency?: IdempotencyRecord;
  resolve(applied: (Applied | null)[]): void;
  reject(e: unknown): void;
}

export interface LmdbState {
  readonly dataDir: string;
  readonly env: RootDatabase;
  readonly dbs: Dbs;
  /** Event seqs and times (only used inside a write transaction). */
  readonly clock: EventClock;
  /** What the keyword lists and vectors below hold, within the budget (../search-memory.ts). */
  readonly searchMemory: SearchMemory;
  /** Each namespace's vectors in memory, following every commit (vector-cache.ts). */
  readonly vectorCache: VectorCache;
  /** Each namespace's keyword lists in memory, following every commit (keyword-cache.ts). */
  readonly keywordCache: LoadedKeywordCache;
  /** The newest current memories of the entities listed most, for list reads (entity-lists.ts). */
  readonly entityLists: EntityLists;
  /** false: the in-memory keyword lists do not follow applies (only for bench/search.ts's index-off baseline). */
  readonly indexOn: boolean;
  /** Smart stores of one entity, one at a time (MemoryWrites.serialize). */
  readonly entityLocks: ReturnType<typeof keyedMutex>;
  /** The applies sharing the write transaction being set up (writes.ts, group commit). */
  pending: Pending[] | undefined;
  /**
   * Writes begun and not yet followed by the in-memory lists, each with the last seq handed out
   * when it began: every event up to the smallest is committed and followed (keyword snapshots
   * are taken as of that seq, keyword-snapshot.ts; see settledSeq).
   */
  readonly inflight: Map<object, number>;
}

/** Resolves once every commit so far is flushed to disk. */
export const flushed = (s: LmdbState): Promise<void> => Promise.resolve(s.env.flushed).then(() => undefined);

/** Any memory record by id, current or not. */
export const getRecord = (s: LmdbState, id: string) => s.dbs.memories.get(id) as MemoryRecord | undefined;

/** The seq up to which every event is committed and followed by the in-memory lists. */
export function settledSeq(s: LmdbState): number {
  let min = s.clock.handedOut;
  for (const seq of s.inflight.values()) if (seq < min) min = seq;
  return min;
}
