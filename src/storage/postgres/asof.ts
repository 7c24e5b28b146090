// The PostgreSQL side of as-of reads: each memory's latest state-changing event up to the moment
// is chosen in the database (DISTINCT ON over the entity's events, read through events_by_entity
// (namespace, entity, at_ms)), so only one row per memory comes back; the shared rules of
// storage/asof.ts make the versions.
import type { SQL } from "bun";
import { byIdDescending, livesAfter, stateKinds, versionAt } from "../asof";
import type { EventRecord, MemoryRecord } from "../records";
import type { AsOfMethods } from "../storage";
import { eventOf, memoryOf, type Row } from "./index";

export interface PgAsOfContext {
  sql: SQL;
  db<T>(fn: () => Promise<T>): Promise<T>;
}

export function pgAsOf({ sql, db }: PgAsOfContext): AsOfMethods {
  const kinds = sql.array([...stateKinds], "text");
  return {
    async entityAsOf(namespace, entity, asOf) {
      // A REPLACE sets two memories' state: the new one (memory_id) and the one it retired.
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
          SELECT latest.mid, e.* FROM latest JOIN events e ON e.seq = latest.seq`,
      );
      const live = new Map<string, EventRecord>();
      for (const r of rows as Row[]) {
        const e = eventOf(r);
        const id = String(r.mid);
        if (livesAfter(id, e)) live.set(id, e);
      }
      if (live.size === 0) return [];
      const records = new Map<string, MemoryRecord>();
      const ids = sql.array([...live.keys()], "text");
      for (const r of await db(() => sql`SELECT * FROM memories WHERE id = ANY(${ids}::uuid[])`))
        records.set(r.id as string, memoryOf(r));
      const out: MemoryRecord[] = [];
      for (const [id, e] of live) {
        const v = versionAt(id, e, records.get(id), asOf);
        if (v) out.push(v);
      }
      return out.sort(byIdDescending);
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
