// The PostgreSQL backend: any number of memd processes share one database. Each call is one
// transaction (concurrent raw stores of one namespace share one: groupedTransactions); order and
// exclusion come from row locks taken inside it (the namespace clock row, the target memory rows,
// an entity's lock row), never from state kept in one process.
import { type ReservedSQL, SQL } from "bun";
import { keyedMutex } from "../mutex";
import type { EventRecord, KeyRecord, MemoryRecord } from "../records";
import { type EventScope, IdempotencyKeyTaken, type MemoryOp, type Storage, StorageError } from "../storage";
import { pgAsOf } from "./asof";
import { pgLifecycle } from "./lifecycle";
import { migrate } from "./schema";
import { keywordSearch, rebuildIndex, semanticSearch, writeIndex } from "./search";
import { applier, applyBatch, storageError, unavailableMessage, type WriteSettings, writeAlone } from "./writes";

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
}

export interface PostgresStorage extends Storage {
  readonly backend: "postgres";
  readonly sql: SQL;
}

export type Row = Record<string, unknown>;
/** `json` columns come back as their text. */
export const json = <T>(v: unknown): T => (typeof v === "string" ? JSON.parse(v) : v) as T;
const num = (v: unknown) => (v === null || v === undefined ? undefined : Number(v));

export function memoryOf(r: Row): MemoryRecord {
  return {
    id: r.id as string,
    namespace: r.namespace as string,
    entity: r.entity as string,
    content: r.content as string,
    category: r.category as string,
    importance: Number(r.importance),
    ...(r.tags !== null ? { tags: json<string[]>(r.tags) } : {}),
    ...(r.metadata !== null ? { metadata: json<Record<string, unknown>>(r.metadata) } : {}),
    ...(r.source !== null ? { source: r.source as string } : {}),
    createdAt: Number(r.created_at),
    updatedAt: Number(r.updated_at),
    ...(r.expires_at !== null ? { expiresAt: Number(r.expires_at) } : {}),
    state: r.state as MemoryRecord["state"],
    ...(r.observed_at !== null && r.observed_at !== undefined ? { observedAt: Number(r.observed_at) } : {}),
  };
}

export const memoryRow = (m: MemoryRecord) => ({
  id: m.id,
  namespace: m.namespace,
  entity: m.entity,
  content: m.content,
  category: m.category,
  importance: m.importance,
  tags: m.tags === undefined ? null : JSON.stringify(m.tags),
  metadata: m.metadata === undefined ? null : JSON.stringify(m.metadata),
  source: m.source ?? null,
  created_at: m.createdAt,
  updated_at: m.updatedAt,
  expires_at: m.expiresAt ?? null,
  state: m.state,
  observed_at: m.observedAt ?? null,
});

export function eventOf(r: Row): EventRecord {
  const e: EventRecord = {
    seq: Number(r.seq),
    namespace: r.namespace as string,
    entity: r.entity as string,
    memoryId: r.memory_id as string,
    event: r.event as EventRecord["event"],
    oldContent: r.old_content as string | null,
    newContent: r.new_content as string | null,
    mergedFromId: r.merged_from_id as string | null,
    reason: r.reason as string | null,
    category: r.category as string,
    atMs: Number(r.at_ms),
    actorKeyId: r.actor_key_id as string | null,
  };
  // The memory's state after the event (records.ts), on events written since schema 5.
  if (r.importance !== null && r.importance !== undefined) e.importance = Number(r.importance);
  if (r.tags !== null && r.tags !== undefined) e.tags = json<string[]>(r.tags);
  if (r.metadata !== null && r.metadata !== undefined) e.metadata = json<Record<string, unknown>>(r.metadata);
  if (r.expires_at !== null && r.expires_at !== undefined) e.expiresAt = Number(r.expires_at);
  if (r.observed_at !== null && r.observed_at !== undefined) e.observedAt = Number(r.observed_at);
  if (r.old_observed_at !== null && r.old_observed_at !== undefined) e.oldObservedAt = Number(r.old_observed_at);
  return e;
}

export const keyRow = (k: KeyRecord) => ({
  id: k.id,
  hash: k.hash,
  name: k.name,
  permission: k.permission,
  namespaces: JSON.stringify(k.namespaces),
  expires_at: k.expiresAt,
  created_at: k.createdAt,
  last_used_at: k.lastUsedAt,
  revoked_at: k.revokedAt,
});

export const eventRow = (e: Omit<EventRecord, "seq">) => ({
  namespace: e.namespace,
  entity: e.entity,
  memory_id: e.memoryId,
  event: e.event,
  old_content: e.oldContent,
  new_content: e.newContent,
  merged_from_id: e.mergedFromId,
  reason: e.reason,
  category: e.category,
  at_ms: e.atMs,
  actor_key_id: e.actorKeyId,
  importance: e.importance ?? null,
  tags: e.tags === undefined ? null : JSON.stringify(e.tags),
  metadata: e.metadata === undefined ? null : JSON.stringify(e.metadata),
  expires_at: e.expiresAt ?? null,
  observed_at: e.observedAt ?? null,
  old_observed_at: e.oldObservedAt ?? null,
});

export function keyOf(r: Row): KeyRecord {
  return {
    id: r.id as string,
    name: r.name as string,
    permission: r.permission as KeyRecord["permission"],
    namespaces: json<string[]>(r.namespaces),
    expiresAt: num(r.expires_at) ?? null,
    createdAt: Number(r.created_at),
    lastUsedAt: num(r.last_used_at) ?? null,
    revokedAt: num(r.revoked_at) ?? null,
    hash: r.hash as string,
  };
}

/** Connects, migrates the schema, and returns the storage. Fails with a clear message if the database cannot be reached. */
export async function openPostgres(o: PostgresOptions): Promise<PostgresStorage> {
  const connect = (max: number) =>
    new SQL({
      url: o.url,
      max,
      connectionTimeout: Math.max(1, Math.ceil(o.connectTimeoutMs / 1000)),
      idleTimeout: 60,
      // No startup parameters but the application's name (poolers refuse or drop the others):
      // the statement timeout and synchronous_commit are set in each write transaction (writes.ts).
      connection: { application_name: "memd" },
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
    const [s] = await tx`SELECT needs_rebuild FROM search_state WHERE id = 1 FOR UPDATE`;
    if (!s?.needs_rebuild) return;
    await rebuildIndex(tx, false, memoryOf);
    await tx`UPDATE search_state SET needs_rebuild = false WHERE id = 1`;
  });
  const local = keyedMutex();

  // A database that stops answering (frozen, or cut off without a reset) cannot cancel the
  // statement it never sees, and the driver waits for TCP to give up: so each read also has a
  // deadline of its own, the statement timeout (waiting for a connection included), past which
  // it answers storage_unavailable. Writes have theirs in writes.ts, checked before COMMIT.
  const callLimitMs = o.statementTimeoutMs;

  /** Runs a read, mapping connection trouble (and no answer within `limitMs`) to storage_unavailable. */
  async function db<T>(fn: () => Promise<T>, limitMs = callLimitMs): Promise<T> {
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
  }

  const writes: WriteSettings = { statementTimeoutMs: o.statementTimeoutMs, commitTimeoutMs: o.statementTimeoutMs };
  const apply = applier(sql, writes, { memoryOf });
  const write = <T>(work: (tx: ReservedSQL) => Promise<T>) => writeAlone(sql, writes, work);

  const storage: PostgresStorage = {
    backend: "postgres",
    sql,

    apply(ops, actorKeyId, now = Date.now(), idempotency) {
      if (ops.length === 0 && !idempotency) return Promise.resolve([]);
      return apply({ ops, actorKeyId, now, idempotency }, onlyAdds(ops));
    },

    async getMemory(id) {
      if (!/^[0-9a-f-]{36}$/i.test(id)) return undefined;
      const [r] = await db(() => sql`SELECT * FROM memories WHERE id = ${id}`);
      return r ? memoryOf(r) : undefined;
    },

    async currentMemories(scope, limit) {
      const now = Date.now();
      const rows = await db(() =>
        scope.entity === undefined
          ? sql`SELECT * FROM memories WHERE state = 'current' AND namespace = ${scope.namespace}
                AND (expires_at IS NULL OR expires_at > ${now}) ORDER BY id LIMIT ${limit}`
          : sql`SELECT * FROM memories WHERE state = 'current' AND namespace = ${scope.namespace}
                AND entity = ${scope.entity} AND (expires_at IS NULL OR expires_at > ${now}) ORDER BY id LIMIT ${limit}`,
      );
      return rows.map(memoryOf);
    },

    async newestEvents(scope, limit) {
      return (await db(() => eventsQuery(sql, scope, undefined, limit))).map(eventOf);
    },

    async eventsAfter(scope, afterMs, limit) {
      return (await db(() => eventsQuery(sql, scope, afterMs, limit))).map(eventOf);
    },

    async namespaces({ prefix, after, limit }) {
      // namespace_clock has one row per namespace that has events, so this reads namespaces, not
      // events. Byte order (COLLATE "C") is LMDB's order, and keeps a prefix one contiguous range.
      const rows = await db(
        () => sql`
          SELECT c.namespace,
            (SELECT max(at_ms) FROM events e WHERE e.namespace = c.namespace) AS last_ms,
            (SELECT count(*) FROM memories m WHERE m.state = 'current' AND m.namespace = c.namespace) AS memories
          FROM namespace_clock c
          WHERE (${after ?? null}::text IS NULL OR c.namespace COLLATE "C" > ${after ?? null}::text)
            AND (${prefix ?? null}::text IS NULL OR starts_with(c.namespace, ${prefix ?? null}::text))
          ORDER BY c.namespace COLLATE "C" LIMIT ${limit}`,
      );
      return rows
        .filter((r: Row) => r.last_ms !== null)
        .map((r: Row) => ({
          namespace: r.namespace as string,
          memories: Number(r.memories),
          lastEventAtMs: Number(r.last_ms),
        }));
    },

    async entities(namespace, { after, limit }) {
      // A skip scan over events_by_entity: one index probe per entity, in the database's collation.
      const rows = await db(
        () => sql`
          WITH RECURSIVE n(entity) AS (
            (SELECT entity FROM events WHERE namespace = ${namespace}
               AND (${after ?? null}::text IS NULL OR entity > ${after ?? null}::text) ORDER BY entity LIMIT 1)
            UNION ALL
            SELECT (SELECT e.entity FROM events e WHERE e.namespace = ${namespace} AND e.entity > n.entity
                    ORDER BY e.entity LIMIT 1)
            FROM n WHERE n.entity IS NOT NULL
          )
          SELECT n.entity,
            (SELECT max(at_ms) FROM events e WHERE e.namespace = ${namespace} AND e.entity = n.entity) AS last_ms,
            (SELECT count(*) FROM memories m WHERE m.state = 'current' AND m.namespace = ${namespace}
               AND m.entity = n.entity) AS memories
          FROM n WHERE n.entity IS NOT NULL LIMIT ${limit}`,
      );
      return rows.map((r: Row) => ({
        entity: r.entity as string,
        memories: Number(r.memories),
        lastEventAtMs: Number(r.last_ms),
      }));
    },

    async dueExpiries(now, limit) {
      const rows = await db(
        () => sql`SELECT id, expires_at FROM memories WHERE state = 'current' AND expires_at <= ${now}
                  ORDER BY expires_at LIMIT ${limit}`,
      );
      return rows.map((r: Row) => ({ id: r.id as string, expiresAt: Number(r.expires_at) }));
    },

    async keywordSearch(scope, terms, filter, limit, now = Date.now()) {
      return db(() => keywordSearch(sql, scope, terms, filter, limit, now, memoryOf));
    },

    async semanticSearch(scope, vector, filter, limit, now = Date.now()) {
      return db(() => semanticSearch(sql, scope, vector, filter, limit, now, memoryOf));
    },

    async pendingEmbeddings(limit) {
      const rows = await db(
        () => sql`SELECT m.id, m.content, m.updated_at FROM embed_pending p JOIN memories m ON m.id = p.memory_id
                  WHERE m.state = 'current' ORDER BY p.memory_id LIMIT ${limit}`,
      );
      return rows.map((r: Row) => ({
        id: r.id as string,
        content: r.content as string,
        updatedAt: Number(r.updated_at),
      }));
    },

    async setVectors(items) {
      if (items.length === 0) return 0;
      return write(async (tx) => {
        const ids = [...new Set(items.map((i) => i.id))].sort();
        const rows = await tx`
            SELECT m.* FROM memories m JOIN embed_pending p ON p.memory_id = m.id
            WHERE m.id IN ${tx(ids)} AND m.state = 'current' ORDER BY m.id FOR UPDATE OF m`;
        const live = new Map<string, MemoryRecord>(rows.map((r: Row) => [r.id as string, memoryOf(r)]));
        const ok = items.filter((i) => live.get(i.id)?.updatedAt === i.updatedAt);
        // As a content change with a vector: replaces any old one and clears the queue entry.
        await writeIndex(
          tx,
          ok.map((i) => ({ before: live.get(i.id)!, after: live.get(i.id)!, vector: i.vector, vectorOnly: true })),
        );
        return ok.length;
      });
    },

    async rebuildSearchIndex(options = {}) {
      return db(() => sql.begin((tx) => rebuildIndex(tx, options.embeddings ?? false, memoryOf)));
    },

    async insertKey(k, options = {}) {
      return write(async (tx) => {
        if (options.onlyIfNone) {
          // The schema version row is the lock every replica takes: one first key, not one each.
          await tx`SELECT 1 FROM memd_schema WHERE id = 1 FOR UPDATE`;
          if ((await tx`SELECT 1 FROM api_keys LIMIT 1`).length > 0) return false;
        }
        await tx`INSERT INTO api_keys ${tx(keyRow(k))}`;
        return true;
      });
    },
    async getKey(id) {
      if (id.includes("\0")) return undefined; // PostgreSQL text cannot hold NUL, so no key has it
      const [r] = await db(() => sql`SELECT * FROM api_keys WHERE id = ${id}`);
      return r ? keyOf(r) : undefined;
    },
    async keyByHash(hash) {
      const [r] = await db(() => sql`SELECT * FROM api_keys WHERE hash = ${hash}`);
      return r ? keyOf(r) : undefined;
    },
    async listKeys() {
      return (await db(() => sql`SELECT * FROM api_keys ORDER BY created_at, id`)).map(keyOf);
    },
    async revokeKey(id, at) {
      if (id.includes("\0")) return false;
      const rows = await write(
        (tx) => tx`UPDATE api_keys SET revoked_at = ${at} WHERE id = ${id} AND revoked_at IS NULL RETURNING id`,
      );
      return rows.length === 1;
    },
    async touchKey(id, at) {
      await db(() => sql`UPDATE api_keys SET last_used_at = ${at} WHERE id = ${id}`);
    },

    durable: () => Promise.resolve(),

    serialize(namespace, entity, fn) {
      // One waiter per entity per process holds a connection; the row lock orders the processes.
      return local(JSON.stringify([namespace, entity]), async () => {
        // fn's own failure passes through as it is; only the database's is mapped.
        let outcome: { ok: true; value: Awaited<ReturnType<typeof fn>> } | { ok: false; error: unknown } | undefined;
        let answered!: () => void;
        const answering = new Promise<void>((resolve) => (answered = resolve));
        let abandoned = false;
        // The lock row exists before any transaction waits on it: inserted inside the locking
        // transaction, a second replica's insert would wait for the first one's whole store.
        await db(
          () =>
            lockSql`INSERT INTO entity_locks (namespace, entity) VALUES (${namespace}, ${entity}) ON CONFLICT DO NOTHING`,
        );
        const locked = lockSql.begin(async (tx) => {
          // Waiting for another replica's smart store is not a stuck statement.
          await tx`SET LOCAL statement_timeout = 300000`;
          answered();
          await tx`SELECT 1 FROM entity_locks WHERE namespace = ${namespace} AND entity = ${entity} FOR UPDATE`;
          if (abandoned) throw new StorageError("storage_unavailable", unavailableMessage); // rolls back
          try {
            outcome = { ok: true, value: await fn() };
          } catch (error) {
            outcome = { ok: false, error };
          }
        });
        // The database must answer within the usual deadline; only the wait for the lock row may be long.
        try {
          await db(() => Promise.race([answering, locked.then(() => undefined)]));
        } catch (e) {
          abandoned = true;
          locked.catch(() => {});
          throw e;
        }
        await db(() => locked, Number.POSITIVE_INFINITY);
        if (!outcome!.ok) throw outcome!.error;
        return outcome!.value;
      });
    },

    ...pgLifecycle({
      sql,
      db,
      write,
      applyIn: async (tx, ops, actorKeyId, now) => {
        const [r] = await applyBatch(tx, [{ ops, actorKeyId, now }], { memoryOf });
        if (r instanceof IdempotencyKeyTaken) throw r;
        return r;
      },
    }),

    ...pgAsOf({ sql, db }),

    async notReadyReason() {
      try {
        // A database that takes no writes (a standby after a failover) is not ready either.
        const [r] = await db(() => sql`SELECT current_setting('transaction_read_only') AS ro`);
        if (r.ro === "on") return "the database is read-only";
        return undefined;
      } catch (e) {
        const mapped = storageError(e);
        return mapped instanceof StorageError ? mapped.message : `the database answered: ${(e as Error).message}`;
      }
    },

    async stats() {
      const [r] = await db(
        () => sql`SELECT
          (SELECT count(*) FROM memories WHERE state = 'current') AS current,
          (SELECT count(*) FROM memories) AS records,
          (SELECT count(*) FROM events) AS events,
          (SELECT count(*) FROM embed_pending) AS pending`,
      );
      return {
        currentMemories: Number(r.current),
        memoryRecords: Number(r.records),
        events: Number(r.events),
        pendingEmbeddings: Number(r.pending),
        gauges: {},
      };
    },

    async close() {
      await Promise.all([sql.close(), lockSql.close()]);
    },
  };
  return storage;
}

/**
 * The group of calls that only add memories (raw stores), which share transactions: they lock
 * only their namespaces' clock rows, in name order within one statement, so a shared
 * transaction over many namespaces cannot deadlock with another. Else undefined: the call runs
 * alone.
 */
const onlyAdds = (ops: readonly MemoryOp[]): string | undefined =>
  ops.every((op) => op.event === "ADD") ? "adds" : undefined;

/** Events of a scope: after `afterMs` oldest first, or (afterMs undefined) newest first. */
function eventsQuery(sql: SQL, scope: EventScope, afterMs: number | undefined, limit: number) {
  const ns = scope.namespace;
  const newest = afterMs === undefined;
  const after = afterMs ?? -1;
  if (scope.memoryId) {
    const id = scope.memoryId;
    return newest
      ? sql`SELECT * FROM events WHERE namespace = ${ns} AND (memory_id = ${id} OR merged_from_id = ${id})
            ORDER BY at_ms DESC LIMIT ${limit}`
      : sql`SELECT * FROM events WHERE namespace = ${ns} AND (memory_id = ${id} OR merged_from_id = ${id})
            AND at_ms > ${after} ORDER BY at_ms LIMIT ${limit}`;
  }
  if (scope.entity !== undefined)
    return newest
      ? sql`SELECT * FROM events WHERE namespace = ${ns} AND entity = ${scope.entity} ORDER BY at_ms DESC LIMIT ${limit}`
      : sql`SELECT * FROM events WHERE namespace = ${ns} AND entity = ${scope.entity} AND at_ms > ${after}
            ORDER BY at_ms LIMIT ${limit}`;
  return newest
    ? sql`SELECT * FROM events WHERE namespace = ${ns} ORDER BY at_ms DESC LIMIT ${limit}`
    : sql`SELECT * FROM events WHERE namespace = ${ns} AND at_ms > ${after} ORDER BY at_ms LIMIT ${limit}`;
}
