// The PostgreSQL backend: any number of memd processes share one database. Each call is one
// transaction; order and exclusion come from row locks taken inside it (the namespace clock row,
// the target memory rows, an entity's lock row), never from state kept in one process.

import { SQL } from "bun";
import { batchApplies } from "../batch";
import { keyedMutex } from "../mutex";
import { planOp, targetIsLive, targetOf, vectorOf } from "../ops";
import type { EventRecord, KeyRecord, MemoryRecord } from "../records";
import { type Applied, type EventScope, type Storage, StorageError } from "../storage";
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

type Row = Record<string, unknown>;
/** `json` columns come back as their text. */
const json = <T>(v: unknown): T => (typeof v === "string" ? JSON.parse(v) : v) as T;
const num = (v: unknown) => (v === null || v === undefined ? undefined : Number(v));

function memoryOf(r: Row): MemoryRecord {
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
  };
}

const memoryRow = (m: MemoryRecord) => ({
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
});

function eventOf(r: Row): EventRecord {
  return {
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
}

const eventRow = (e: Omit<EventRecord, "seq">) => ({
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
});

function keyOf(r: Row): KeyRecord {
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
const unavailableStates = /^(08|57P0|57014|53300|55P03|40001|40P01)/;

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
    return new StorageError("storage_unavailable", "the database is unavailable; try again shortly");
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
      connection: { statement_timeout: String(o.statementTimeoutMs), application_name: "memd" },
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

  /** Runs a database call, mapping connection trouble to storage_unavailable. */
  async function db<T>(fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (e) {
      throw storageError(e);
    }
  }

  const storage: PostgresStorage = {
    backend: "postgres",
    sql,

    apply(ops, actorKeyId, now = Date.now()) {
      if (ops.length === 0) return Promise.resolve([]);
      return db(() =>
        sql.begin(async (tx) => {
          // Lock order, the same in every writer: target memory rows by id, then clock rows by namespace.
          const ids = [...new Set(ops.map(targetOf).filter((id): id is string => id !== undefined))].sort();
          const targets = new Map<string, MemoryRecord>();
          if (ids.length > 0)
            for (const r of await tx`SELECT * FROM memories WHERE id IN ${tx(ids)} ORDER BY id FOR UPDATE`)
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
          const clocks = await tx`
            INSERT INTO namespace_clock AS c (namespace, last_ms)
            SELECT ns, ${now}::bigint + n - 1 FROM unnest(${sql.array(namespaces, "text")}::text[], ${sql.array(counts, "int8")}::bigint[]) AS t(ns, n)
            ORDER BY ns
            ON CONFLICT (namespace) DO UPDATE
              SET last_ms = GREATEST(${now}::bigint, c.last_ms + 1) + (EXCLUDED.last_ms - ${now}::bigint)
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

          if (writes.size > 0)
            await tx`
              INSERT INTO memories ${tx([...writes.values()].map(memoryRow))}
              ON CONFLICT (id) DO UPDATE SET
                content = EXCLUDED.content, category = EXCLUDED.category, importance = EXCLUDED.importance,
                tags = EXCLUDED.tags, metadata = EXCLUDED.metadata, source = EXCLUDED.source,
                updated_at = EXCLUDED.updated_at, expires_at = EXCLUDED.expires_at, state = EXCLUDED.state`;
          // The search index changes in this same transaction.
          if (touched.size > 0) await writeIndex(tx, touched.values());
          const planned = results.filter((r) => r !== null).map((r) => r.planned.event);
          const seqs = new Map<string, number>();
          if (planned.length > 0)
            for (const r of await tx`INSERT INTO events ${tx(planned.map(eventRow))} RETURNING seq, namespace, at_ms`)
              seqs.set(`${r.namespace}\0${r.at_ms}`, Number(r.seq));
          return results.map((r): Applied | null => {
            if (!r) return null;
            const e = r.planned.event;
            const memory = r.planned.created ?? r.planned.target!;
            return { event: { ...e, seq: seqs.get(`${e.namespace}\0${e.atMs}`)! }, memory };
          });
        }),
      );
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

    async insertKey(k) {
      await db(
        () =>
          sql`INSERT INTO api_keys ${sql({
            id: k.id,
            hash: k.hash,
            name: k.name,
            permission: k.permission,
            namespaces: JSON.stringify(k.namespaces),
            expires_at: k.expiresAt,
            created_at: k.createdAt,
            last_used_at: k.lastUsedAt,
            revoked_at: k.revokedAt,
          })}`,
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
    async hasKeys() {
      return (await db(() => sql`SELECT 1 FROM api_keys LIMIT 1`)).length > 0;
    },

    durable: () => Promise.resolve(),

    serialize(namespace, entity, fn) {
      // One waiter per entity per process holds a connection; the row lock orders the processes.
      return local(JSON.stringify([namespace, entity]), async () => {
        // fn's own failure passes through as it is; only the database's is mapped.
        let outcome: { ok: true; value: Awaited<ReturnType<typeof fn>> } | { ok: false; error: unknown } | undefined;
        await db(() =>
          lockSql.begin(async (tx) => {
            // Waiting for another replica's smart store is not a stuck statement.
            await tx`SET LOCAL statement_timeout = 300000`;
            await tx`INSERT INTO entity_locks (namespace, entity) VALUES (${namespace}, ${entity}) ON CONFLICT DO NOTHING`;
            await tx`SELECT 1 FROM entity_locks WHERE namespace = ${namespace} AND entity = ${entity} FOR UPDATE`;
            try {
              outcome = { ok: true, value: await fn() };
            } catch (error) {
              outcome = { ok: false, error };
            }
          }),
        );
        if (!outcome!.ok) throw outcome!.error;
        return outcome!.value;
      });
    },

    async notReadyReason() {
      try {
        await sql`SELECT 1`;
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
  // Concurrent applies share a transaction and its commit (group commit, as LMDB does).
  storage.apply = batchApplies(storage.apply.bind(storage));
  return storage;
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
