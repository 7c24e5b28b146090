// The PostgreSQL backend's state: the connections and the call wrappers every role shares,
// built once by index.ts and passed to each role's functions.
import type { ReservedSQL, SQL, TransactionSQL } from "bun";
import type { keyedMutex } from "../mutex";
import type { SearchMemory } from "../search-memory";
import type { Applied, IdempotencyRecord, MemoryOp } from "../storage";
import type { PgEntityLists } from "./entity-lists";
import type { PgKeywordLists } from "./keyword-cache";
import type { Preload } from "./snapshots";
import type { PgVectorCache } from "./vector-cache";

export interface PgState {
  readonly sql: SQL;
  /**
   * Connections of their own for smart stores, which hold an entity's lock row for the length of
   * a model call: so that they can never take every connection the writes they wait for need.
   */
  readonly lockSql: SQL;
  /** The statement timeout: also the longest close() waits for queries still running (upkeep.ts). */
  readonly statementTimeoutMs: number;
  /** What the keyword lists and vectors below hold, within this replica's budget (../search-memory.ts). */
  readonly searchMemory: SearchMemory;
  /** Each namespace's vectors in memory on this replica, followed before each search (vector-cache.ts). */
  readonly vectors: PgVectorCache;
  /** This replica's keyword lists per namespace searched (keyword-cache.ts); undefined: keyword search by SQL only. */
  readonly keywordLists: PgKeywordLists | undefined;
  /** The newest current memories of the entities listed most, for list reads (entity-lists.ts). */
  readonly entityLists: PgEntityLists;
  /** The reading of the search snapshots at start (snapshots.ts), when they are on. */
  readonly preload?: Preload;
  /** One waiter per entity per process (MemoryWrites.serialize). */
  readonly entityLocks: ReturnType<typeof keyedMutex>;
  /**
   * Runs a read, mapping connection trouble (and no answer within `limitMs`, by default the
   * statement timeout) to storage_unavailable.
   */
  db<T>(fn: () => Promise<T>, limitMs?: number): Promise<T>;
  /**
   * A read as `db` runs it, on a connection of its own (`q`, reserved from `sql`): one that has
   * not answered by the deadline is closed, never pooled again (see index.ts reservedReads).
   */
  read<T>(fn: (q: SQL) => Promise<T>, limitMs?: number): Promise<T>;
  /** A write in a transaction of its own (writes.ts: deadline before COMMIT, its own bound after). */
  write<T>(work: (tx: ReservedSQL) => Promise<T>): Promise<T>;
  /**
   * Applies, each alone or in a transaction shared with others of its group: writes.ts GroupCommit
   * (described here by its shape, since writes.ts imports this file through search.ts).
   */
  readonly groupCommit: {
    /** Per group, the calls not yet in a transaction, in arrival order. */
    readonly waiting: ReadonlyMap<string, readonly unknown[]>;
    apply(
      call: { ops: readonly MemoryOp[]; actorKeyId: string | null; now: number; idempotency?: IdempotencyRecord },
      group: string | undefined,
    ): Promise<(Applied | null)[]>;
  };
  /** Applies ops inside a transaction of the caller's (an erasure's). */
  applyIn(
    tx: TransactionSQL | ReservedSQL,
    ops: readonly MemoryOp[],
    actorKeyId: string | null,
    now: number,
  ): Promise<(Applied | null)[]>;
}
