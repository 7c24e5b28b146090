// The PostgreSQL backend: any number of memd processes share one database. Each call is one
// transaction (concurrent raw stores of one namespace share one: groupedTransactions); order and
// exclusion come from row locks taken inside it (the namespace clock row, the target memory rows,
// an entity's lock row), never from state kept in one process. This file connects, migrates,
// builds the state every role shares (state.ts) and assembles the roles, one file each.
import { type ReservedSQL, SQL } from "bun";
import { keyedMutex } from "../mutex";
import { SearchMemory } from "../search-memory";
import { IdempotencyKeyTaken, type Storage, StorageError } from "../storage";
import { pgAsOf } from "./asof";
import { pgBrowse } from "./browse";
import { pgEmbeddings } from "./embeddings";
import { PgEntityLists } from "./entity-lists";
import { pgErasure } from "./erasure";
import { pgEvents } from "./events";
import { type PgFollowers, pgFollowers } from "./follow";
import { pgIdempotency } from "./idempotency";
import { pgKeys } from "./keys";
import { type PgKeywordLists, pgKeywordLists } from "./keyword-cache";
import { pgMemories } from "./memories";
import { memoryOf } from "./rows";
import { migrate } from "./schema";
import { pgSearch, rebuildIndex } from "./search";
import { preloadSnapshots } from "./snapshots";
import type { PgState } from "./state";
import { pgTransfer } from "./transfer";
import { pgUpkeep } from "./upkeep";
import { PgVectorCache } from "./vector-cache";
import { pgWebhooks } from "./webhooks";
import { applyBatch, GroupCommit, storageError, unavailableMessage, type WriteSettings, writeAlone } from "./writes";

export { storageError };

export interface PostgresOptions {
  url: string;
  pool: number;
  /**
   * What sits between memd and PostgreSQL. "transaction": a pooler in transaction mode (PgBouncer
   * below 1.21, or one without max_prepared_statements), which cannot keep named prepared
   * statements from one transaction to the next: memd then sends every statement unnamed.
   * "session" and "none" change nothing (memd keeps no session state in any mode).
   */
  pooler?: "none" | "session" | "transaction";
  connectTimeoutMs: number;
  statementTimeoutMs: number;
  /**
   * Keyword lists in this process's memory per namespace searched, following the events table
   * (keyword-cache.ts; default true); false: every keyword search is one SQL statement.
   */
  keywordLists?: boolean;
  /** The search-memory budget of this replica in MiB (../search-memory.ts); unset: 256. */
  searchMemoryMb?: number;
  /**
   * Keyword lists and vectors of namespaces of at least this many memories are written to the
   * database once built and read by other replicas and restarts (snapshots.ts); unset: 10,000; 0: off.
   */
  snapshotFrom?: number;
  /** The connections' application_name, as pg_stat_activity shows them; unset: memd. */
  applicationName?: string;
}

export interface PostgresStorage extends Storage {
  readonly backend: "postgres";
  readonly sql: SQL;
  /** This replica's in-memory vectors (tests and benches look at their loads). */
  readonly vectors: PgVectorCache;
  /** This replica's keyword lists (undefined when turned off). */
  readonly keywordLists: PgKeywordLists | undefined;
  /** What keeps both in step with the database (tests and benches count its statements). */
  readonly followers: PgFollowers;
}

/** Connects, migrates the schema, and returns the storage. Fails with a clear message if the database cannot be reached. */
export async function openPostgres(o: PostgresOptions): Promise<PostgresStorage> {
  // Without a pooler, the server bounds every statement as well (reads run outside a transaction,
  // where no SET LOCAL reaches them), and probes a memd that vanished (TCP keepalives: its
  // connections, and any lock they hold, end within about a minute). Poolers refuse such startup
  // parameters: behind one, set them on the role (docs/postgres.md).
  const serverSide: Record<string, number> =
    (o.pooler ?? "none") === "none"
      ? {
          statement_timeout: Math.trunc(o.statementTimeoutMs),
          tcp_keepalives_idle: 30,
          tcp_keepalives_interval: 10,
          tcp_keepalives_count: 3,
        }
      : {};
  const connect = (max: number) =>
    new SQL({
      url: o.url,
      max,
      connectionTimeout: Math.max(1, Math.ceil(o.connectTimeoutMs / 1000)),
      idleTimeout: 60,
      // Behind a pooler no startup parameters but the application's name (poolers refuse or drop
      // the others): the statement timeout and synchronous_commit are set in each write
      // transaction (writes.ts).
      connection: { application_name: o.applicationName ?? "memd", ...serverSide },
      prepare: o.pooler !== "transaction",
    });
  const sql = connect(o.pool);
  // Smart stores hold an entity's lock row for the length of a model call: on their own
  // connections, so that they can never take every connection the writes they wait for need.
  const lockSql = connect(o.pool);
  try {
    await migrate(sql);
  } catch (e) {
    await Promise.all([sql.close(), lockSql.close()]);
    const why = (e as Error).message ?? String(e);
    throw new Error(`could not open the PostgreSQL database: ${why}`);
  }
  // Memories stored before the search index existed: indexed once, by the first process to get here.
  await sql.begin(async (tx) => {
    await tx`SET LOCAL statement_timeout = 0`; // a rebuild takes as long as the store is large
    const [s] = await tx`SELECT needs_rebuild FROM search_state WHERE id = 1 FOR UPDATE`;
    if (!s?.needs_rebuild) return;
    await rebuildIndex(tx, false, memoryOf);
    await tx`UPDATE search_state SET needs_rebuild = false WHERE id = 1`;
  });

  // A database that stops answering (frozen, or cut off without a reset) cannot cancel the
  // statement it never sees, and the driver waits for TCP to give up: so each read also has a
  // deadline of its own, the statement timeout (waiting for a connection included), past which
  // it answers storage_unavailable. Writes have theirs in writes.ts, checked before COMMIT.
  const writes: WriteSettings = { statementTimeoutMs: o.statementTimeoutMs, commitTimeoutMs: o.statementTimeoutMs };
  const db = reads(o.statementTimeoutMs);
  const read = reservedReads(sql, db);
  // One follower per namespace keeps its keyword lists and its vectors in step (follow.ts).
  const followers = pgFollowers(sql, db);
  const searchMemory = new SearchMemory((o.searchMemoryMb ?? 256) * 1024 * 1024);
  const keywordLists =
    o.keywordLists === false ? undefined : pgKeywordLists(sql, db, followers, searchMemory, o.snapshotFrom ?? 10000);
  const vectors = new PgVectorCache(sql, db, followers, searchMemory, o.snapshotFrom ?? 10000);
  // The snapshots other replicas wrote (or this one before a restart), read before it is ready.
  const preload =
    (o.snapshotFrom ?? 10000) > 0
      ? preloadSnapshots(db, sql, searchMemory.budget, {
          ...(keywordLists ? { keyword: (ns: string) => keywordLists.load(ns) } : {}),
          vector: (ns) => vectors.preload(ns),
        })
      : undefined;
  const s: PgState = {
    sql,
    preload,
    lockSql,
    statementTimeoutMs: o.statementTimeoutMs,
    searchMemory,
    vectors,
    keywordLists,
    entityLists: new PgEntityLists(read),
    entityLocks: keyedMutex(),
    db,
    read,
    write: <T>(work: (tx: ReservedSQL) => Promise<T>) => writeAlone(sql, writes, work),
    groupCommit: new GroupCommit(sql, writes),
    applyIn: async (tx, ops, actorKeyId, now) => {
      const done = await applyBatch(tx, [{ ops, actorKeyId, now }]);
      await Promise.all(done.last ?? []);
      const [r] = done.values;
      if (r instanceof IdempotencyKeyTaken) throw r;
      return r;
    },
  };
  return {
    backend: "postgres",
    sharedWithReplicas: true,
    sql,
    vectors: s.vectors,
    keywordLists,
    followers,
    ...pgMemories(s),
    ...pgEvents(s),
    ...pgAsOf(s),
    ...pgBrowse(s),
    ...pgSearch(s),
    ...pgEmbeddings(s),
    ...pgKeys(s),
    ...pgErasure(s),
    ...pgTransfer(s),
    ...pgIdempotency(s),
    ...pgWebhooks(s),
    ...pgUpkeep(s),
  };
}

/**
 * Reads on a connection reserved for each (`db`'s deadline and mapping). A connection that has not
 * answered by the deadline is closed: a database gone silent without a reset leaves it waiting
 * for TCP to give up or to retransmit (minutes, with its backoff, even after the network is
 * back), and a pooled one would hold every later read that got it. Closed, the pool opens a new
 * one (within the connect timeout) for the next read.
 */
function reservedReads(sql: SQL, db: PgState["db"]): PgState["read"] {
  return <T>(fn: (q: SQL) => Promise<T>, limitMs?: number) => {
    let conn: ReservedSQL | undefined;
    let settled = false;
    let abandoned = false;
    return db(async () => {
      const c = await sql.reserve();
      if (abandoned) {
        c.close().catch(() => undefined);
        throw new StorageError("storage_unavailable", unavailableMessage);
      }
      conn = c;
      try {
        const value = await fn(c);
        settled = true;
        c.release();
        return value;
      } catch (e) {
        settled = true;
        // The database answered an error (a SQLSTATE): the connection is sound.
        if (/^[0-9A-Z]{5}$/.test(String((e as { errno?: string })?.errno ?? ""))) c.release();
        else c.close().catch(() => undefined);
        throw e;
      }
    }, limitMs).catch((e) => {
      if (!settled) {
        abandoned = true;
        conn?.close().catch(() => undefined);
      }
      throw e;
    });
  };
}

/** Reads that map connection trouble (and no answer within `limitMs`) to storage_unavailable. */
function reads(callLimitMs: number): PgState["db"] {
  return async <T>(fn: () => Promise<T>, limitMs = callLimitMs): Promise<T> => {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const call = fn();
    const deadline = new Promise<never>((_, reject) => {
      if (limitMs !== Number.POSITIVE_INFINITY)
        timer = setTimeout(() => reject(new StorageError("storage_unavailable", unavailableMessage)), limitMs);
    });
    try {
      return await Promise.race([call, deadline]);
    } catch (e) {
      call.catch(() => {}); // settles later, with nobody waiting
      throw storageError(e);
    } finally {
      clearTimeout(timer);
    }
  };
}
