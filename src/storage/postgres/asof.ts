// The PostgreSQL side of as-of reads: each memory's latest state-changing event up to the moment
// is chosen in the database (DISTINCT ON over the entity's events, read through events_by_entity
// (namespace, entity, at_ms)), and only those of memories that were current then come back; the
// records of the page are read in chunks, and the shared rules of storage/asof.ts make the
// versions.
import { pageOfVersions, stateKinds, versionAt } from "../asof";
import { matchesFilter } from "../ops";
import type { EventRecord, MemoryRecord } from "../records";
import type { AsOfQuery, AsOfReads, MemoryPage } from "../storage";
import { eventOf, memoryOf, type Row } from "./rows";
import type { PgState } from "./state";

/** Sorts after every UUID: no cursor. */
const noCursor = "ffffffff-ffff-ffff-ffff-ffffffffffff";

/** Memories one namespace-wide as-of page looks at, at most, before it answers a short page. */
const NAMESPACE_SCAN = 1000;

export function pgAsOf({ sql, read }: PgState): AsOfReads {
  const kinds = sql.array([...stateKinds], "text");

  /**
   * A namespace as of a moment, a chunk of memories at a time, newest first: their ids by a skip
   * scan over events_by_memory (namespace, memory_id, at_ms) (every memory has its creation event
   * under its own id), then each one's latest state-changing event up to the moment (under its id
   * or, for a REPLACE that retired it, events_by_superseded). A page stops after NAMESPACE_SCAN
   * memories with a next page, as a filtered list may.
   */
  async function namespaceAsOf(q: AsOfQuery): Promise<MemoryPage> {
    const { namespace, asOf } = q;
    const limit = q.limit ?? Number.POSITIVE_INFINITY;
    const out: MemoryRecord[] = [];
    let before = q.before ?? noCursor;
    for (let seen = 0; seen < NAMESPACE_SCAN; ) {
      const chunk = Math.min(200, NAMESPACE_SCAN - seen);
      const ids: string[] = (
        await read(
          (sql) => sql`
            WITH RECURSIVE ids(mid) AS (
              (SELECT memory_id FROM events WHERE namespace = ${namespace} AND memory_id < ${before}::uuid
                 ORDER BY memory_id DESC LIMIT 1)
              UNION ALL
              SELECT (SELECT e.memory_id FROM events e WHERE e.namespace = ${namespace} AND e.memory_id < ids.mid
                      ORDER BY e.memory_id DESC LIMIT 1)
              FROM ids WHERE ids.mid IS NOT NULL
            )
            SELECT mid FROM ids WHERE mid IS NOT NULL LIMIT ${chunk}`,
        )
      ).map((r: Row) => String(r.mid));
      if (ids.length === 0) return { memories: out };
      const rows = await read(
        (sql) => sql`
          SELECT m.mid, e.* FROM unnest(${sql.array(ids, "text")}::uuid[]) AS m(mid)
          CROSS JOIN LATERAL (
            SELECT * FROM (
              (SELECT * FROM events WHERE namespace = ${namespace} AND memory_id = m.mid AND at_ms <= ${asOf}
                 AND event = ANY(${kinds}::text[]) ORDER BY at_ms DESC LIMIT 1)
              UNION ALL
              (SELECT * FROM events WHERE namespace = ${namespace} AND merged_from_id = m.mid AND at_ms <= ${asOf}
                 AND event = 'REPLACE' ORDER BY at_ms DESC LIMIT 1)
            ) both_sides ORDER BY at_ms DESC LIMIT 1
          ) e`,
      );
      const latest = new Map<string, EventRecord>();
      for (const r of rows as Row[]) latest.set(String(r.mid), eventOf(r));
      const live = ids.filter((id) => latest.has(id));
      const records = new Map<string, MemoryRecord>();
      if (live.length > 0)
        for (const r of await read(
          (sql) => sql`SELECT * FROM memories WHERE id = ANY(${sql.array(live, "text")}::uuid[])`,
        ))
          records.set(r.id as string, memoryOf(r));
      for (const id of live) {
        const v = versionAt(id, latest.get(id)!, records.get(id), asOf);
        if (v === undefined || !matchesFilter(v, q.filter ?? {})) continue;
        // One more than asked: there is a next page, continuing after the last one shown.
        if (out.length === limit) return { memories: out, next: out.at(-1)!.id };
        out.push(v);
      }
      seen += ids.length;
      before = ids.at(-1)!;
      if (ids.length < chunk) return { memories: out };
    }
    return { memories: out, next: before };
  }

  /**
   * Each memory of an entity whose latest state-changing event up to `asOf` leaves it current
   * (not deleted, not retired by a REPLACE, not expired by the event's expiry), after the cursor
   * `before`, newest first: one scan of events_by_entity (namespace, entity, at_ms), each event
   * counted for its memory and, a REPLACE, for the one it retired, DISTINCT ON the memory. Only
   * narrow columns come back; the events of the memories used are read by seq afterwards.
   */
  const latestOf = (namespace: string, entity: string, asOf: number, before: string): Promise<Row[]> =>
    read(
      (sql) => sql`
        SELECT mid, seq, new_content, importance IS NOT NULL AS full FROM (
          SELECT DISTINCT ON (t.mid) t.mid, e.seq, e.event, e.memory_id, e.expires_at, e.new_content, e.importance
          FROM events e
          CROSS JOIN LATERAL (VALUES (e.memory_id),
            (CASE WHEN e.event = 'REPLACE' AND e.merged_from_id <> e.memory_id THEN e.merged_from_id END)) t(mid)
          WHERE e.namespace = ${namespace} AND e.entity = ${entity} AND e.at_ms <= ${asOf}
            AND e.event = ANY(${kinds}::text[]) AND t.mid IS NOT NULL
          ORDER BY t.mid DESC, e.at_ms DESC
        ) latest
        WHERE latest.mid < ${before}::uuid AND latest.event <> 'DELETE' AND latest.memory_id = latest.mid
          AND (latest.expires_at IS NULL OR latest.expires_at > ${asOf})
        ORDER BY latest.mid DESC`,
    );

  /** The versions at `asOf` of memories `ids` from their latest events' seqs: events and records in two reads. */
  async function versionsOf(ids: string[], seqOf: Map<string, number>, asOf: number) {
    if (ids.length === 0) return [];
    const seqs = sql.array(
      ids.map((id) => String(seqOf.get(id))),
      "text",
    );
    const events = new Map<number, EventRecord>(
      (await read((sql) => sql`SELECT * FROM events WHERE seq = ANY(${seqs}::bigint[])`)).map(
        (r: Row) => [Number(r.seq), eventOf(r)] as const,
      ),
    );
    const records = new Map<string, MemoryRecord>(
      (await read((sql) => sql`SELECT * FROM memories WHERE id = ANY(${sql.array(ids, "text")}::uuid[])`)).map(
        (r: Row) => [r.id as string, memoryOf(r)] as const,
      ),
    );
    return ids.map((id) => {
      const e = events.get(seqOf.get(id)!);
      return e === undefined ? undefined : versionAt(id, e, records.get(id), asOf);
    });
  }

  return {
    async entityAsOf(q) {
      if (q.entity === undefined) return namespaceAsOf(q);
      const { namespace, entity, asOf } = q as AsOfQuery & { entity: string };
      const rows = await latestOf(namespace, entity, asOf, q.before ?? noCursor);
      const seqOf = new Map<string, number>();
      for (const r of rows) seqOf.set(String(r.mid), Number(r.seq));
      return pageOfVersions([...seqOf.keys()], (ids) => versionsOf(ids, seqOf, asOf), q.filter ?? {}, q.limit);
    },

    async entityTextsAsOf({ namespace, entity, asOf }) {
      const rows = await latestOf(namespace, entity, asOf, noCursor);
      const seqOf = new Map<string, number>();
      const texts: { id: string; content: string }[] = [];
      const older: string[] = [];
      for (const r of rows) {
        const id = String(r.mid);
        seqOf.set(id, Number(r.seq));
        // An event older than observedAt: its version needs the record (versionAt). Otherwise
        // the checks of versionAt that need no record: an erasure scrubs the record and every
        // event of the memory in one transaction, so its latest event tells it too.
        if (!r.full) older.push(id);
        else if (r.new_content !== null && r.new_content !== undefined)
          texts.push({ id, content: String(r.new_content) });
      }
      if (older.length > 0) {
        const vs = await versionsOf(older, seqOf, asOf);
        older.forEach((id, i) => {
          if (vs[i] !== undefined) texts.push({ id, content: vs[i]!.content });
        });
        // Newest first, as without older events.
        texts.sort((a, b) => (a.id < b.id ? 1 : a.id > b.id ? -1 : 0));
      }
      return { texts, versions: (ids) => versionsOf(ids, seqOf, asOf) };
    },

    async memoryAsOf(id, asOf) {
      if (!/^[0-9a-f-]{36}$/i.test(id)) return undefined;
      const [m] = await read((sql) => sql`SELECT * FROM memories WHERE id = ${id}`);
      if (!m) return undefined;
      const record = memoryOf(m);
      const [r] = await read(
        (sql) => sql`
          SELECT * FROM events WHERE namespace = ${record.namespace} AND (memory_id = ${id} OR merged_from_id = ${id})
            AND at_ms <= ${asOf} AND event = ANY(${kinds}::text[])
          ORDER BY at_ms DESC LIMIT 1`,
      );
      return r ? versionAt(id, eventOf(r), record, asOf) : undefined;
    },
  };
}
