// The PostgreSQL browse reads: namespaces from namespace_clock, entities by a skip scan.
import type { Browse } from "../storage";
import type { Row } from "./rows";
import type { PgState } from "./state";

export function pgBrowse(s: PgState): Browse {
  const { read } = s;
  return {
    async namespaces({ prefix, after, limit }) {
      // namespace_clock has one row per namespace that has events, so this reads namespaces, not
      // events. Byte order (COLLATE "C") is LMDB's order, and keeps a prefix one contiguous range.
      const rows = await read(
        (sql) => sql`
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

    async entities(namespace, { prefix, after, limit }) {
      // A skip scan over events_by_entity: one index probe per entity, in the database's collation.
      const rows = await read(
        (sql) => sql`
          WITH RECURSIVE n(entity) AS (
            (SELECT entity FROM events WHERE namespace = ${namespace}
               AND (${after ?? null}::text IS NULL OR entity > ${after ?? null}::text)
               AND (${prefix ?? null}::text IS NULL OR starts_with(entity, ${prefix ?? null}::text))
               ORDER BY entity LIMIT 1)
            UNION ALL
            SELECT (SELECT e.entity FROM events e WHERE e.namespace = ${namespace} AND e.entity > n.entity
                    AND (${prefix ?? null}::text IS NULL OR starts_with(e.entity, ${prefix ?? null}::text))
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
  };
}
