// The PostgreSQL erasure of an entity, in one transaction, and the record of erasures.

import { uuidText } from "../../wire/schemas";
import type { ErasureRecord } from "../records";
import type { Erasure, MemoryOp } from "../storage";
import { erasureOf, erasureRow, type Row } from "./rows";
import type { PgState } from "./state";

export function pgErasure(s: PgState): Erasure {
  const { sql, read, write, applyIn } = s;
  return {
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
        await tx`UPDATE memories SET content = '', tags = NULL, metadata = NULL, source = NULL, key = NULL
            WHERE id = ANY(${ids}::uuid[])`;
        const scrubbed =
          await tx`UPDATE events SET old_content = NULL, new_content = NULL, tags = NULL, metadata = NULL, reason = 'erased'
            WHERE namespace = ${namespace} AND (memory_id = ANY(${ids}::uuid[]) OR merged_from_id = ANY(${ids}::uuid[]))
            RETURNING seq`;
        // Stored answers that name an erased memory (a store's answer holds its content).
        await tx`DELETE FROM idempotency i WHERE i.body IS NOT NULL AND EXISTS (
            SELECT 1 FROM regexp_matches(i.body, ${uuidText}, 'g') AS m(x)
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
        // Its place in the trail, after its DELETEs (webhooks deliver the erasure from there); taken
        // once the transaction has its id (the insert), as the trail's horizon requires (webhooks.ts).
        await tx`UPDATE erasures SET seq = nextval('event_seq')
            WHERE namespace = ${namespace} AND entity = ${entity} AND at_ms = ${erasure.atMs}`;
        // Search snapshots of the namespace may hold the erased memories (snapshots.ts).
        await tx`DELETE FROM search_snapshot_parts WHERE namespace = ${namespace}`;
        await tx`DELETE FROM search_snapshots WHERE namespace = ${namespace}`;
        // Last, so that erasures wait on this one row only as they commit (webhooks.ts reads it).
        await tx`UPDATE erasures_committed SET n = n + 1 WHERE id = 1`;
        return erasure;
      }).then((erasure) => {
        // This replica writes its copies again once they have followed the erasure.
        s.keywordLists?.erased(namespace);
        s.vectors.erased(namespace);
        // Its list in this replica's memory held the erased contents.
        s.entityLists.erased(JSON.stringify([namespace, entity]));
        return erasure;
      });
    },

    async erasures(namespace, entity) {
      const rows = await read((sql) =>
        entity === undefined
          ? sql`SELECT * FROM erasures WHERE namespace = ${namespace} ORDER BY at_ms`
          : sql`SELECT * FROM erasures WHERE namespace = ${namespace} AND entity = ${entity} ORDER BY at_ms`,
      );
      return rows.map(erasureOf);
    },
  };
}
