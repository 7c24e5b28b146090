// The PostgreSQL memory roles: apply (writes.ts: one transaction per call, raw stores of one
// namespace grouped), per-entity serialization across replicas (a row lock), and reads of
// current memories.
import type { MemoryRecord } from "../records";
import type { MemoryOp, MemoryReads, MemoryWrites } from "../storage";
import { StorageError } from "../storage";
import { memoryOf, type Row } from "./rows";
import type { PgState } from "./state";
import { unavailableMessage } from "./writes";

export function pgMemories(s: PgState): MemoryWrites & MemoryReads {
  const { sql, lockSql, db, read, entityLocks } = s;
  return {
    apply(ops, actorKeyId, now = Date.now(), idempotency) {
      if (ops.length === 0 && !idempotency) return Promise.resolve([]);
      return s.groupCommit.apply({ ops, actorKeyId, now, idempotency }, onlyAdds(ops));
    },

    serialize(namespace, entity, fn) {
      // One waiter per entity per process holds a connection; the row lock orders the processes.
      return entityLocks(JSON.stringify([namespace, entity]), async () => {
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

    durable: () => Promise.resolve(),

    async getMemory(id) {
      if (!/^[0-9a-f-]{36}$/i.test(id)) return undefined;
      const [r] = await read((sql) => sql`SELECT * FROM memories WHERE id = ${id}`);
      return r ? memoryOf(r) : undefined;
    },

    async currentMemories(scope, limit) {
      const now = Date.now();
      const rows = await read((sql) =>
        scope.entity === undefined
          ? sql`SELECT * FROM memories WHERE state = 'current' AND namespace = ${scope.namespace}
                AND (expires_at IS NULL OR expires_at > ${now}) ORDER BY id LIMIT ${limit}`
          : sql`SELECT * FROM memories WHERE state = 'current' AND namespace = ${scope.namespace}
                AND entity = ${scope.entity} AND (expires_at IS NULL OR expires_at > ${now}) ORDER BY id LIMIT ${limit}`,
      );
      return rows.map(memoryOf);
    },

    async listMemories(q) {
      const now = Date.now();
      // An entity's large pages from its copy in this replica's memory, when it can answer them.
      const kept = await s.entityLists.list(q, now);
      if (kept) return kept;
      const before = q.before ?? "ffffffff-ffff-ffff-ffff-ffffffffffff";
      // Tags are written as JSON text into a json column (a JSON string holding the array); read either form.
      const tags = q.tags?.length ? sql.array(q.tags, "text") : null;
      const rows = await read(
        (sql) => sql`SELECT * FROM memories WHERE state = 'current' AND namespace = ${q.namespace}
          AND (${q.entity ?? null}::text IS NULL OR entity = ${q.entity ?? null})
          AND (${q.entityPrefix ?? null}::text IS NULL OR starts_with(entity, ${q.entityPrefix ?? null}::text))
          AND (${q.category ?? null}::text IS NULL OR category = ${q.category ?? null})
          AND (${tags}::text[] IS NULL OR (tags IS NOT NULL AND (CASE WHEN json_typeof(tags) = 'string'
            THEN (tags #>> '{}')::jsonb ELSE tags::jsonb END) ?& ${tags}::text[]))
          AND (expires_at IS NULL OR expires_at > ${now})
          AND (${q.observedAfter ?? null}::bigint IS NULL OR COALESCE(observed_at, created_at) >= ${q.observedAfter ?? null})
          AND (${q.observedBefore ?? null}::bigint IS NULL OR COALESCE(observed_at, created_at) < ${q.observedBefore ?? null})
          AND id < ${before}::uuid
          ORDER BY id DESC LIMIT ${q.limit + 1}`,
      );
      const memories = rows.slice(0, q.limit).map(memoryOf);
      return { memories, next: rows.length > q.limit ? memories.at(-1)!.id : undefined };
    },

    async adjacentMemories(memories, now) {
      if (memories.length === 0) return [];
      const ids = sql.array(
        memories.map((m) => m.id),
        "text",
      );
      const rows = await db(
        () => sql`SELECT h.id AS of_id, n.* FROM memories h, LATERAL (
            (SELECT * FROM memories p WHERE p.state = 'current' AND p.namespace = h.namespace AND p.entity = h.entity
              AND p.id < h.id AND (p.expires_at IS NULL OR p.expires_at > ${now}) ORDER BY p.id DESC LIMIT 1)
            UNION ALL
            (SELECT * FROM memories q WHERE q.state = 'current' AND q.namespace = h.namespace AND q.entity = h.entity
              AND q.id > h.id AND (q.expires_at IS NULL OR q.expires_at > ${now}) ORDER BY q.id LIMIT 1)
          ) n WHERE h.id = ANY(${ids}::uuid[])`,
      );
      return rows.map((r: Row) => [String(r.of_id), memoryOf(r)] as [string, MemoryRecord]);
    },

    async memoryByKey(namespace, entity, key, now = Date.now()) {
      const [r] = await read(
        (sql) => sql`SELECT * FROM memories WHERE namespace = ${namespace} AND entity = ${entity} AND key = ${key}
          AND state = 'current' AND (expires_at IS NULL OR expires_at > ${now})`,
      );
      return r ? memoryOf(r) : undefined;
    },

    async dueExpiries(now, limit) {
      const rows = await read(
        (sql) => sql`SELECT id, expires_at FROM memories WHERE state = 'current' AND expires_at <= ${now}
                  ORDER BY expires_at LIMIT ${limit}`,
      );
      return rows.map((r: Row) => ({ id: r.id as string, expiresAt: Number(r.expires_at) }));
    },
  };
}

/**
 * The group of calls that only add memories (raw stores without a key: a keyed store locks its
 * key's row, writes.ts), which share transactions: they lock
 * only their namespaces' clock rows, in name order within one statement, so a shared
 * transaction over many namespaces cannot deadlock with another. Else undefined: the call runs
 * alone.
 */
const onlyAdds = (ops: readonly MemoryOp[]): string | undefined =>
  ops.every((op) => op.event === "ADD" && op.create.key === undefined) ? "adds" : undefined;
