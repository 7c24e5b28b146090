// The PostgreSQL audit trail reads, through the events indexes of schema.ts.
import type { SQL } from "bun";
import type { EventReads, EventScope } from "../storage";
import { eventOf } from "./rows";
import type { PgState } from "./state";

export function pgEvents(s: PgState): EventReads {
  const { read } = s;
  return {
    async newestEvents(scope, limit) {
      return (await read((sql) => eventsQuery(sql, scope, undefined, limit))).map(eventOf);
    },

    async eventsAfter(scope, afterMs, limit) {
      return (await read((sql) => eventsQuery(sql, scope, afterMs, limit))).map(eventOf);
    },
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
