// The PostgreSQL side of as-of reads: each memory's latest state-changing event up to the moment
// is chosen in the database (DISTINCT ON over the entity's events, read through events_by_entity
// (namespace, entity, at_ms)), and only those of memories that were current then come back; the
// records of the page are read in chunks, and the shared rules of storage/asof.ts make the
// versions.
import type { SQL } from "bun";
import { pageOfVersions, stateKinds, versionAt } from "../asof";
import type { EventRecord, MemoryRecord } from "../records";
import type { AsOfReads } from "../storage";
import { eventOf, memoryOf, type Row } from "./index";

export interface PgAsOfContext {
  sql: SQL;
  db<T>(fn: () => Promise<T>): Promise<T>;
}

/** Sorts after every UUID: no cursor. */
const noCursor = "ffffffff-ffff-ffff-ffff-ffffffffffff";

export function pgAsOf({ sql, db }: PgAsOfContext): AsOfReads {
  const kinds = sql.array([...stateKinds], "text");
  return {
    async entityAsOf(q) {
      const { namespace, entity, asOf } = q;
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
