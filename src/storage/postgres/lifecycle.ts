// The PostgreSQL side of a memory's whole life: paged lists, erasure, export and import,
// idempotent answers. Spread into the storage object in index.ts.
import type { ReservedSQL, SQL, TransactionSQL } from "bun";
import type { ErasureRecord, ExportRecord, IdempotencyEntry, KeyRecord, MemoryRecord } from "../records";
import type { Applied, Erasure, Idempotency, MemoryOp, MemoryReads, Transfer } from "../storage";
import { eventOf, eventRow, keyOf, keyRow, memoryOf, memoryRow, type Row } from "./index";
import { writeIndex } from "./search";

type Methods = Pick<MemoryReads, "listMemories"> & Erasure & Transfer & Idempotency;

export interface PgLifecycleContext {
  sql: SQL;
  /** A read, with its deadline. */
  db<T>(fn: () => Promise<T>): Promise<T>;
  /** A write in a transaction of its own (writes.ts: deadline before COMMIT, its own bound after). */
  write<T>(work: (tx: ReservedSQL) => Promise<T>): Promise<T>;
  applyIn(
    tx: TransactionSQL | ReservedSQL,
    ops: readonly MemoryOp[],
    actorKeyId: string | null,
    now: number,
  ): Promise<(Applied | null)[]>;
}

/** Rows per keyset page of an export. */
const PAGE = 2000;
const uuidRegex = "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}";

const erasureOf = (r: Row): ErasureRecord => ({
  namespace: r.namespace as string,
  entity: r.entity as string,
  atMs: Number(r.at_ms),
  actorKeyId: r.actor_key_id as string | null,
  memories: Number(r.memories),
  events: Number(r.events),
});

const erasureRow = (e: ErasureRecord) => ({
  namespace: e.namespace,
  entity: e.entity,
  at_ms: e.atMs,
  actor_key_id: e.actorKeyId,
  memories: e.memories,
  events: e.events,
});

const withoutType = (r: ExportRecord) => {
  const { type: _type, ...rest } = r;
  return rest;
};

/** Each record's id as its table knows it. */
const idOf = (r: ExportRecord): string =>
  r.type === "event" ? String(r.seq) : r.type === "erasure" ? `${r.namespace}\0${r.entity}\0${r.atMs}` : r.id;

export function pgLifecycle({ sql, db, write, applyIn }: PgLifecycleContext): Methods {
  /** Stored records with the ids of `records`, by type and id. */
  async function found(q: SQL, records: readonly ExportRecord[]): Promise<Map<string, unknown>> {
    const by = (t: ExportRecord["type"]) => records.filter((r) => r.type === t);
    const out = new Map<string, unknown>();
    const memIds = by("memory").map(idOf);
    if (memIds.length)
      for (const r of await q`SELECT * FROM memories WHERE id = ANY(${sql.array(memIds, "text")}::uuid[])`)
        out.set(`memory ${r.id}`, memoryOf(r));
    const seqs = by("event").map(idOf);
    if (seqs.length)
      for (const r of await q`SELECT * FROM events WHERE seq = ANY(${sql.array(seqs, "text")}::bigint[])`)
        out.set(`event ${r.seq}`, eventOf(r));
    const keyIds = by("key").map(idOf);
    if (keyIds.length)
      for (const r of await q`SELECT * FROM api_keys WHERE id = ANY(${sql.array(keyIds, "text")}::text[])`)
        out.set(`key ${r.id}`, keyOf(r));
    for (const e of by("erasure") as ErasureRecord[]) {
      const [r] =
        await q`SELECT * FROM erasures WHERE namespace = ${e.namespace} AND entity = ${e.entity} AND at_ms = ${e.atMs}`;
      if (r) out.set(`erasure ${idOf({ type: "erasure", ...e })}`, erasureOf(r));
    }
    return out;
  }

  return {
    async listMemories(q) {
      const now = Date.now();
      const before = q.before ?? "ffffffff-ffff-ffff-ffff-ffffffffffff";
      // Tags are written as JSON text into a json column (a JSON string holding the array); read either form.
      const tags = q.tags?.length ? sql.array(q.tags, "text") : null;
      const rows = await db(
        () => sql`SELECT * FROM memories WHERE state = 'current' AND namespace = ${q.namespace}
          AND (${q.entity ?? null}::text IS NULL OR entity = ${q.entity ?? null})
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

    erase(namespace, entity, actorKeyId, now = Date.now()) {
      return write(async (tx) => {
        const rows = await tx`SELECT id, state, expires_at FROM memories
            WHERE namespace = ${namespace} AND entity = ${entity} ORDER BY id FOR UPDATE`;
        // An expiry not yet swept is deleted too: the op names its expiry, so it still acts.
        const ops: MemoryOp[] = rows
          .filter((r: Row) => r.state === "current")
          .map((r: Row) => ({
            event: "DELETE" as const,
            target: r.id as string,
            reason: "erased",
            ...(r.expires_at !== null ? { expiresAt: Number(r.expires_at) } : {}),
          }));
        if (ops.length) await applyIn(tx, ops, actorKeyId, now);
        // Exactly the memories locked above: a store committed meanwhile is after the erasure and
        // keeps its content, its events and its stored answer.
        const ids = sql.array(
          rows.map((r: Row) => r.id as string),
          "text",
        );
        await tx`UPDATE memories SET content = '', tags = NULL, metadata = NULL, source = NULL
            WHERE id = ANY(${ids}::uuid[])`;
        const scrubbed =
          await tx`UPDATE events SET old_content = NULL, new_content = NULL, tags = NULL, metadata = NULL, reason = 'erased'
            WHERE namespace = ${namespace} AND (memory_id = ANY(${ids}::uuid[]) OR merged_from_id = ANY(${ids}::uuid[]))
            RETURNING seq`;
        // Stored answers that name an erased memory (a store's answer holds its content).
        await tx`DELETE FROM idempotency i WHERE i.body IS NOT NULL AND EXISTS (
            SELECT 1 FROM regexp_matches(i.body, ${uuidRegex}, 'g') AS m(x)
            WHERE lower(m.x[1])::uuid = ANY(${ids}::uuid[]))`;
        const [last] =
          await tx`SELECT max(at_ms) AS at FROM erasures WHERE namespace = ${namespace} AND entity = ${entity}`;
        const erasure: ErasureRecord = {
          namespace,
          entity,
          atMs: last.at === null ? now : Math.max(now, Number(last.at) + 1),
          actorKeyId,
          memories: rows.length,
          events: scrubbed.length,
        };
        await tx`INSERT INTO erasures ${tx(erasureRow(erasure))}`;
        return erasure;
      });
    },

    async erasures(namespace, entity) {
      const rows = await db(() =>
        entity === undefined
          ? sql`SELECT * FROM erasures WHERE namespace = ${namespace} ORDER BY at_ms`
          : sql`SELECT * FROM erasures WHERE namespace = ${namespace} AND entity = ${entity} ORDER BY at_ms`,
      );
      return rows.map(erasureOf);
    },

    async *exportAll({ namespaces, keys: withKeys }) {
      // One REPEATABLE READ transaction on a reserved connection: every page reads one snapshot.
      const conn = await db(() => sql.reserve());
      let open = false;
      try {
        await conn`BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY`;
        open = true;
        const nss = namespaces ? sql.array(namespaces, "text") : null;
        let afterId = "00000000-0000-0000-0000-000000000000";
        for (;;) {
          const rows = await conn`SELECT * FROM memories WHERE id > ${afterId}::uuid
            AND (${nss}::text[] IS NULL OR namespace = ANY(${nss}::text[])) ORDER BY id LIMIT ${PAGE}`;
          for (const r of rows) yield { type: "memory", ...memoryOf(r) };
          if (rows.length < PAGE) break;
          afterId = rows.at(-1).id;
        }
        let afterSeq = 0;
        for (;;) {
          const rows = await conn`SELECT * FROM events WHERE seq > ${afterSeq}
            AND (${nss}::text[] IS NULL OR namespace = ANY(${nss}::text[])) ORDER BY seq LIMIT ${PAGE}`;
          for (const r of rows) yield { type: "event", ...eventOf(r) };
          if (rows.length < PAGE) break;
          afterSeq = Number(rows.at(-1).seq);
        }
        for (const r of await conn`SELECT * FROM erasures WHERE (${nss}::text[] IS NULL OR namespace = ANY(${nss}::text[]))
            ORDER BY namespace COLLATE "C", entity COLLATE "C", at_ms`)
          yield { type: "erasure", ...erasureOf(r) };
        if (withKeys)
          for (const r of await conn`SELECT * FROM api_keys ORDER BY id COLLATE "C"`)
            yield { type: "key", ...keyOf(r) };
        await conn`COMMIT`;
        open = false;
      } finally {
        if (open) await conn`ROLLBACK`.catch(() => undefined);
        conn.release();
      }
    },

    async existing(records) {
      const stored = await db(() => found(sql, records));
      return records.map((r) => {
        const s = stored.get(`${r.type} ${idOf(r)}`);
        if (s === undefined) return "absent";
        return Bun.deepEquals(s, withoutType(r)) ? "identical" : "different";
      });
    },

    importRecords(records, options) {
      return write(async (tx) => {
        let batch = records;
        if (options.renumberEvents) {
          // Renumbered events take fresh seqs from the sequence, in order (each above every seq in use).
          const n = records.filter((r) => r.type === "event").length;
          const seqs = n
            ? (await tx`SELECT nextval('event_seq') AS s FROM generate_series(1, ${n})`)
                .map((r: { s: string }) => Number(r.s))
                .sort((a: number, b: number) => a - b)
            : [];
          let i = 0;
          batch = records.map((r) => (r.type === "event" ? { ...r, seq: seqs[i++] } : r));
        }
        const stored = await found(tx, batch);
        const seen = new Set<string>();
        const keep: ExportRecord[] = [];
        let skipped = 0;
        for (const r of batch) {
          const id = `${r.type} ${idOf(r)}`;
          const s = stored.get(id);
          if (s !== undefined || seen.has(id)) {
            const identical = s !== undefined && Bun.deepEquals(s, withoutType(r));
            if (options.skipExisting || (options.skipIdentical && identical)) {
              skipped++;
              continue;
            }
            throw new Error(`${r.type} ${JSON.stringify(idOf(r))} already exists`);
          }
          seen.add(id);
          keep.push(r);
        }
        const of = <T extends ExportRecord["type"]>(t: T) =>
          keep.filter((r) => r.type === t) as Extract<ExportRecord, { type: T }>[];
        const memories = of("memory").map((r) => memoryRow(withoutType(r) as MemoryRecord));
        const events = of("event");
        const keyRows = of("key").map((r) => keyRow(withoutType(r) as KeyRecord));
        const erasureRows = of("erasure").map((r) => erasureRow(withoutType(r) as ErasureRecord));
        for (let i = 0; i < memories.length; i += 1000)
          await tx`INSERT INTO memories ${tx(memories.slice(i, i + 1000))}`;
        // Imported current memories join the keyword index at once; their vectors come from `memd reindex`.
        const current = of("memory")
          .map((r) => withoutType(r) as MemoryRecord)
          .filter((m) => m.state === "current");
        if (current.length > 0)
          await writeIndex(
            tx,
            current.map((after) => ({ before: undefined, after, vector: undefined })),
          );
        for (let i = 0; i < events.length; i += 1000)
          await tx`INSERT INTO events ${tx(events.slice(i, i + 1000).map((e) => ({ seq: e.seq, ...eventRow(e) })))}`;
        if (keyRows.length) await tx`INSERT INTO api_keys ${tx(keyRows)}`;
        if (erasureRows.length) await tx`INSERT INTO erasures ${tx(erasureRows)}`;
        if (events.length) {
          // New events continue after the imported ones: their seq and, per namespace, their time.
          await tx`SELECT setval('event_seq', GREATEST((SELECT max(seq) FROM events), (SELECT last_value FROM event_seq)))`;
          const last = new Map<string, number>();
          for (const e of events) last.set(e.namespace, Math.max(last.get(e.namespace) ?? 0, e.atMs));
          const nss = [...last.keys()].sort();
          await tx`INSERT INTO namespace_clock AS c (namespace, last_ms)
              SELECT * FROM unnest(${sql.array(nss, "text")}::text[], ${sql.array(
                nss.map((n) => last.get(n)!),
                "int8",
              )}::bigint[])
              ON CONFLICT (namespace) DO UPDATE SET last_ms = GREATEST(c.last_ms, EXCLUDED.last_ms)`;
        }
        if (options.seqFloor !== undefined)
          await tx`SELECT setval('event_seq', GREATEST(${options.seqFloor}::bigint, (SELECT last_value FROM event_seq)))`;
        return { written: keep.length, skipped };
      });
    },

    async idempotentAnswer(keyId, key, now) {
      const [r] = await db(
        () => sql`SELECT * FROM idempotency WHERE key_id = ${keyId} AND idem_key = ${key}
          AND state = 'done' AND expires_at > ${now}`,
      );
      if (!r) return undefined;
      const entry: IdempotencyEntry = {
        keyId,
        key,
        hash: r.hash as string,
        state: "done",
        status: Number(r.status),
        body: r.body as string,
        createdAt: Number(r.created_at),
        expiresAt: Number(r.expires_at),
      };
      return entry;
    },

    async sweepIdempotency(now, limit) {
      const rows = await db(
        () => sql`DELETE FROM idempotency WHERE (key_id, idem_key) IN (
          SELECT key_id, idem_key FROM idempotency WHERE expires_at <= ${now} LIMIT ${limit}) RETURNING 1`,
      );
      return rows.length;
    },
  };
}
