// The PostgreSQL backend: any number of memd processes share one database. Each call is one
// transaction (concurrent raw stores of one namespace share one: groupedTransactions); order and
// exclusion come from row locks taken inside it (the namespace clock row, the target memory rows,
// an entity's lock row), never from state kept in one process.
import { SQL, type TransactionSQL } from "bun";
import { keyedMutex } from "../mutex";
import { planOp, stampFloor, targetIsLive, targetOf, vectorOf } from "../ops";
import type { EventRecord, KeyRecord, MemoryRecord } from "../records";
import { type Applied, type EventScope, type MemoryOp, type Storage, StorageError } from "../storage";
import { pgAsOf } from "./asof";
import { pgLifecycle } from "./lifecycle";
import { migrate } from "./schema";
import { type IndexTouch, keywordSearch, rebuildIndex, semanticSearch, writeIndex } from "./search";

export interface PostgresOptions {
  url: string;
  pool: number;
  connectTimeoutMs: number;
  statementTimeoutMs: number;
}

export interface PostgresStorage extends Storage {
  readonly backend: "postgres";
  readonly sql: SQL;
}

export type Row = Record<string, unknown>;
/** Rows per multi-row INSERT: under the protocol's 65,535 parameters at 18 columns. */
const ROWS_PER_INSERT = 2000;
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

/** SQLSTATE classes that mean "the database is not there right now", not "the request is wrong". */
// 25006: a read-only transaction, as on a standby after a failover.
const unavailableStates = /^(08|57P0|57014|53300|55P03|40001|40P01|25006)/;

const unavailableMessage = "the database is unavailable; try again shortly";

/** Maps a driver error to a StorageError when it is about the database, not about the query. */
export function storageError(e: unknown): unknown {
  const err = e as { code?: string; errno?: string; message?: string };
  const state = String(err?.errno ?? "");
  if (state === "53100") return new StorageError("storage_full", "the database is out of disk space");
  if (
    unavailableStates.test(state) ||
    /CONNECTION|TIMEOUT|ECONNREFUSED|ECONNRESET|closed/i.test(String(err?.code ?? "")) ||
    /connection|ECONNREFUSED|timeout|terminat/i.test(String(err?.message ?? ""))
  )
    return new StorageError("storage_unavailable", unavailableMessage);
  return e;
}

/** Connects, migrates the schema, and returns the storage. Fails with a clear message if the database cannot be reached. */
export async function openPostgres(o: PostgresOptions): Promise<PostgresStorage> {
  const connect = (max: number) =>
    new SQL({
      url: o.url,
      max,
      connectionTimeout: Math.max(1, Math.ceil(o.connectTimeoutMs / 1000)),
      idleTimeout: 60,
      // synchronous_commit on whatever the role's or database's default: a 2xx means committed to disk.
      connection: {
        statement_timeout: String(o.statementTimeoutMs),
        application_name: "memd",
        synchronous_commit: "on",
      },
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
  const transaction = groupedTransactions(sql);

  // A database that stops answering (frozen, or cut off without a reset) cannot cancel the
  // statement it never sees, and the driver waits for TCP to give up: so each call also has a
  // deadline of its own, the statement timeout (waiting for a connection included), past which
  // it answers storage_unavailable. The abandoned statement finishes or fails in the background
  // when the database returns.
  const callLimitMs = o.statementTimeoutMs;

  /**
   * Runs a database call, mapping connection trouble (and no answer within `limitMs`) to
   * storage_unavailable. `fn` gets `waited()`: false once the caller was answered with that
   * error, so that a write still queued then is never made after its 503.
   */
  async function db<T>(fn: (waited: () => boolean) => Promise<T>, limitMs = callLimitMs): Promise<T> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    let gaveUp = false;
    const call = fn(() => !gaveUp);
    const deadline = new Promise<never>((_, reject) => {
      if (limitMs !== Number.POSITIVE_INFINITY)
        timer = setTimeout(() => {
          gaveUp = true;
          reject(new StorageError("storage_unavailable", unavailableMessage));
        }, limitMs);
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

  /**
   * The body of `apply`, inside a transaction the caller holds (apply's own, or an erasure's).
   * Lock order, the same in every writer: target memory rows by id, then clock rows by namespace.
   */
  async function applyIn(
    tx: TransactionSQL,
    ops: readonly MemoryOp[],
    actorKeyId: string | null,
    now: number,
  ): Promise<(Applied | null)[]> {
    // Lock order, the same in every writer: target memory rows by id, then clock rows by namespace.
    const ids = [...new Set(ops.map(targetOf).filter((id): id is string => id !== undefined))].sort();
    const targets = new Map<string, MemoryRecord>();
    if (ids.length > 0)
      for (const r of await tx`SELECT * FROM memories WHERE id = ANY(${sql.array(ids, "text")}::uuid[]) ORDER BY id FOR UPDATE`)
        targets.set(r.id as string, memoryOf(r));

    const live = ops.map((op) => {
      const id = targetOf(op);
      if (id === undefined) return { op, target: undefined };
      const target = targets.get(id);
      return targetIsLive(op, target, now) ? { op, target } : undefined;
    });
    const perNamespace = new Map<string, number>();
    for (const l of live) {
      if (!l) continue;
      const ns = "create" in l.op ? l.op.create.namespace : l.target!.namespace;
      perNamespace.set(ns, (perNamespace.get(ns) ?? 0) + 1);
    }
    const namespaces = [...perNamespace.keys()].sort();
    const counts = namespaces.map((ns) => perNamespace.get(ns)!);
    // Takes each clock row's lock for the rest of the transaction and reserves `count` stamps.
    const floor = stampFloor(now);
    const clocks = await tx`
        INSERT INTO namespace_clock AS c (namespace, last_ms)
        SELECT ns, ${floor}::bigint + n - 1 FROM unnest(${sql.array(namespaces, "text")}::text[], ${sql.array(counts, "int8")}::bigint[]) AS t(ns, n)
        ORDER BY ns
        ON CONFLICT (namespace) DO UPDATE
          SET last_ms = GREATEST(${floor}::bigint, c.last_ms + 1) + (EXCLUDED.last_ms - ${floor}::bigint)
        RETURNING namespace, last_ms`;
    const nextMs = new Map<string, number>();
    for (const c of clocks)
      nextMs.set(c.namespace as string, Number(c.last_ms) - perNamespace.get(c.namespace as string)! + 1);

    const results: ({ planned: ReturnType<typeof planOp> } | null)[] = [];
    const writes = new Map<string, MemoryRecord>();
    // Per memory: as it was before this transaction, as it ends, and its last vector update.
    const touched = new Map<string, IndexTouch>();
    const touch = (before: MemoryRecord | undefined, after: MemoryRecord, vector: IndexTouch["vector"]) => {
      const t = touched.get(after.id);
      if (t) {
        t.after = after;
        if (t.before?.content !== after.content || vector !== undefined) t.vector = vector;
      } else touched.set(after.id, { before, after, vector });
    };
    for (const l of live) {
      if (!l) {
        results.push(null);
        continue;
      }
      const target = l.target && (writes.get(l.target.id) ?? l.target);
      if (l.target && !targetIsLive(l.op, target, now)) {
        results.push(null);
        continue;
      }
      const ns = "create" in l.op ? l.op.create.namespace : target!.namespace;
      const atMs = nextMs.get(ns)!;
      nextMs.set(ns, atMs + 1);
      const planned = planOp(l.op, target, atMs, actorKeyId);
      if (planned.created) {
        writes.set(planned.created.id, planned.created);
        touch(undefined, planned.created, vectorOf(l.op));
      }
      if (planned.target && planned.target !== target) {
        writes.set(planned.target.id, planned.target);
        touch(l.target, planned.target, planned.created ? undefined : vectorOf(l.op));
      }
      results.push({ planned });
    }

    // In chunks: the wire protocol takes at most 65,535 parameters per statement (13 per memory row).
    const rows = [...writes.values()].map(memoryRow);
    for (let i = 0; i < rows.length; i += ROWS_PER_INSERT)
      await tx`
          INSERT INTO memories ${tx(rows.slice(i, i + ROWS_PER_INSERT))}
          ON CONFLICT (id) DO UPDATE SET
            content = EXCLUDED.content, category = EXCLUDED.category, importance = EXCLUDED.importance,
            tags = EXCLUDED.tags, metadata = EXCLUDED.metadata, source = EXCLUDED.source,
            updated_at = EXCLUDED.updated_at, expires_at = EXCLUDED.expires_at, state = EXCLUDED.state,
            observed_at = EXCLUDED.observed_at`;
    // The search index changes in this same transaction.
    if (touched.size > 0) await writeIndex(tx, touched.values());
    const planned = results.filter((r) => r !== null).map((r) => r.planned.event);
    const seqs = new Map<string, number>();
    for (let i = 0; i < planned.length; i += ROWS_PER_INSERT)
      for (const r of await tx`INSERT INTO events ${tx(planned.slice(i, i + ROWS_PER_INSERT).map(eventRow))} RETURNING seq, namespace, at_ms`)
        seqs.set(`${r.namespace}\0${r.at_ms}`, Number(r.seq));
    return results.map((r): Applied | null => {
      if (!r) return null;
      const e = r.planned.event;
      const memory = r.planned.created ?? r.planned.target!;
      return { event: { ...e, seq: seqs.get(`${e.namespace}\0${e.atMs}`)! }, memory };
    });
  }

  const storage: PostgresStorage = {
    backend: "postgres",
    sql,

    apply(ops, actorKeyId, now = Date.now()) {
      if (ops.length === 0) return Promise.resolve([]);
      return db((waited) => transaction(addsToOneNamespace(ops), waited, (tx) => applyIn(tx, ops, actorKeyId, now)));
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
      return db(() =>
        sql.begin(async (tx) => {
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
        }),
      );
    },

    async rebuildSearchIndex(options = {}) {
      return db(() => sql.begin((tx) => rebuildIndex(tx, options.embeddings ?? false, memoryOf)));
    },

    async insertKey(k, options = {}) {
      return db(() =>
        sql.begin(async (tx) => {
          if (options.onlyIfNone) {
            // The schema version row is the lock every replica takes: one first key, not one each.
            await tx`SELECT 1 FROM memd_schema WHERE id = 1 FOR UPDATE`;
            if ((await tx`SELECT 1 FROM api_keys LIMIT 1`).length > 0) return false;
          }
          await tx`INSERT INTO api_keys ${tx(keyRow(k))}`;
          return true;
        }),
      );
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
      const rows = await db(
        () => sql`UPDATE api_keys SET revoked_at = ${at} WHERE id = ${id} AND revoked_at IS NULL RETURNING id`,
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

    ...pgLifecycle({ sql, db, applyIn }),

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

/** The namespace of ops that only add memories to one namespace (raw stores); else undefined. */
function addsToOneNamespace(ops: readonly MemoryOp[]): string | undefined {
  const ns = ops[0]?.event === "ADD" ? ops[0].create.namespace : undefined;
  return ns !== undefined && ops.every((op) => op.event === "ADD" && op.create.namespace === ns) ? ns : undefined;
}

/** Most calls one shared transaction takes. */
const maxGroup = 128;

/**
 * Runs `fn` in a transaction. Calls with the same `group` key that arrive while one of theirs is
 * running share the next transaction, one after the other (group commit): a namespace's writes
 * hold its clock row until their commit, so one transaction per call would put a commit (an
 * fsync) between every two writes of a namespace. Grouped calls only add to that one namespace,
 * so they lock that one clock row and nothing else: grouping cannot deadlock. Each call still
 * lands whole or not at all. If the shared transaction fails for a reason other than the
 * database's state, nothing committed, and each call runs again alone, so one bad call fails
 * only itself. A call whose caller stopped waiting (`waited()` false) before it began is not
 * made at all.
 */
function groupedTransactions(sql: SQL) {
  type Call = {
    fn: (tx: TransactionSQL) => Promise<unknown>;
    waited: () => boolean;
    resolve(v: unknown): void;
    reject(e: unknown): void;
  };
  const waiting = new Map<string, Call[]>();
  const gaveUp = () => new StorageError("storage_unavailable", unavailableMessage);
  /** Runs fn in a transaction of its own, unless its caller stopped waiting before it began. */
  const alone = <T>(fn: (tx: TransactionSQL) => Promise<T>, waited: () => boolean) =>
    sql.begin((tx) => (waited() ? fn(tx) : Promise.reject(gaveUp()))) as Promise<T>;

  async function drain(group: string) {
    for (let calls = waiting.get(group); calls && calls.length > 0; calls = waiting.get(group)) {
      const batch = calls.splice(0, maxGroup);
      try {
        const results = await sql.begin(async (tx) => {
          const out: ({ value: unknown } | undefined)[] = [];
          for (const c of batch) out.push(c.waited() ? { value: await c.fn(tx) } : undefined);
          return out;
        });
        for (const [i, c] of batch.entries()) {
          const r = results[i];
          if (r) c.resolve(r.value);
          else c.reject(gaveUp());
        }
      } catch (e) {
        if (batch.length === 1 || storageError(e) instanceof StorageError) for (const c of batch) c.reject(e);
        else for (const c of batch) alone(c.fn, c.waited).then(c.resolve, c.reject);
      }
    }
    waiting.delete(group);
  }

  return <T>(group: string | undefined, waited: () => boolean, fn: (tx: TransactionSQL) => Promise<T>): Promise<T> => {
    if (group === undefined) return alone(fn, waited);
    return new Promise<T>((resolve, reject) => {
      const calls = waiting.get(group);
      const call = { fn, waited, resolve: resolve as (v: unknown) => void, reject };
      if (calls) return void calls.push(call);
      waiting.set(group, [call]);
      void drain(group);
    });
  };
}

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
