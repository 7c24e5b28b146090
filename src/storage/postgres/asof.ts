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

export function pgAsOf({ sql, db }: PgState): AsOfReads {
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
        await db(
          () => sql`
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
      const rows = await db(
        () => sql`
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
        for (const r of await db(() => sql`SELECT * FROM memories WHERE id = ANY(${sql.array(live, "text")}::uuid[])`))
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

  return {
    async entityAsOf(q) {
      if (q.entity === undefined) return namespaceAsOf(q);
      const { namespace, entity, asOf } = q as AsOfQuery & { entity: string };
      const before = q.before ?? noCursor;
      // A REPLACE sets two memories' state: the new one (memory_id) and the one it retired. An
      // event that tells no expiry (older ones) leaves it to the record (versionAt).
      const rows = await db(
        () => sql`
          WITH touched AS (
            SELECT memory_id AS mid, seq, at_ms FROM events
              WHERE namespace = ${namespace} AND entity = ${entity} AND at_ms <= ${asOf} AND event = ANY(${kinds}::text[])
            UNION ALL
            SELECT merged_from_id, seq, at_ms FROM events
              WHERE namespace = ${namespace} AND entity = ${entity} AND at_ms <= ${asOf} AND event = 'REPLACE'
                AND merged_from_id IS NOT NULL AND merged_from_id <> memory_id
          ), latest AS (
            SELECT DISTINCT ON (mid) mid, seq FROM touched ORDER BY mid, at_ms DESC
          )
          SELECT latest.mid, e.* FROM latest JOIN events e ON e.seq = latest.seq
          WHERE latest.mid < ${before}::uuid AND e.event <> 'DELETE' AND e.memory_id = latest.mid
            AND (e.expires_at IS NULL OR e.expires_at > ${asOf})
          ORDER BY latest.mid DESC`,
      );
      const latest = new Map<string, EventRecord>();
      for (const r of rows as Row[]) latest.set(String(r.mid), eventOf(r));
      return pageOfVersions(
        [...latest.keys()],
        async (ids) => {
          const records = new Map<string, MemoryRecord>(
            (await db(() => sql`SELECT * FROM memories WHERE id = ANY(${sql.array(ids, "text")}::uuid[])`)).map(
              (r: Row) => [r.id as string, memoryOf(r)] as const,
            ),
          );
          return ids.map((id) => versionAt(id, latest.get(id)!, records.get(id), asOf));
        },
        q.filter ?? {},
        q.limit,
      );
    },

    async memoryAsOf(id, asOf) {
      if (!/^[0-9a-f-]{36}$/i.test(id)) return undefined;
      const [m] = await db(() => sql`SELECT * FROM memories WHERE id = ${id}`);
      if (!m) return undefined;
      const record = memoryOf(m);
      const [r] = await db(
        () => sql`
          SELECT * FROM events WHERE namespace = ${record.namespace} AND (memory_id = ${id} OR merged_from_id = ${id})
            AND at_ms <= ${asOf} AND event = ANY(${kinds}::text[])
          ORDER BY at_ms DESC LIMIT 1`,
      );
      return r ? versionAt(id, eventOf(r), record, asOf) : undefined;
    },
  };
}
