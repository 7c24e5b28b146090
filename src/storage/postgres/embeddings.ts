// The PostgreSQL embedding queue and vectors (written through search.ts), and rebuilding the
// search index.
import { stampFloor } from "../ops";
import type { MemoryRecord } from "../records";
import type { Embeddings } from "../storage";
import { memoryOf, type Row } from "./rows";
import { rebuildIndex, writeIndex } from "./search";
import type { PgState } from "./state";

export function pgEmbeddings(s: PgState): Embeddings {
  const { sql, db, read, write } = s;
  return {
    async pendingEmbeddings(limit) {
      const rows = await read(
        (sql) => sql`SELECT m.id, m.content, m.updated_at FROM embed_pending p JOIN memories m ON m.id = p.memory_id
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
      return write(async (tx) => {
        const ids = [...new Set(items.map((i) => i.id))].sort();
        const rows = await tx`
            SELECT m.* FROM memories m JOIN embed_pending p ON p.memory_id = m.id
            WHERE m.id IN ${tx(ids)} AND m.state = 'current' ORDER BY m.id FOR UPDATE OF m`;
        const live = new Map<string, MemoryRecord>(rows.map((r: Row) => [r.id as string, memoryOf(r)]));
        const ok = items.filter((i) => live.get(i.id)?.updatedAt === i.updatedAt);
        if (ok.length === 0) return 0;
        // No event tells replicas about these vectors: each namespace's clock row gives them a
        // stamp (taken as apply takes it, in name order after the memory rows, so commits of a
        // namespace's stamps follow its clock), which the vector rows carry (vector-cache.ts).
        const nss = [...new Set(ok.map((i) => live.get(i.id)!.namespace))];
        const floor = stampFloor(Date.now());
        const clocks = await tx`
            INSERT INTO namespace_clock AS c (namespace, last_ms)
            SELECT ns, ${floor}::bigint FROM unnest(${tx.array(nss, "text")}::text[]) AS t(ns)
            ORDER BY ns COLLATE "C"
            ON CONFLICT (namespace) DO UPDATE SET last_ms = GREATEST(${floor}::bigint, c.last_ms + 1)
            RETURNING namespace, last_ms`;
        const stamps = new Map<string, number>(clocks.map((r: Row) => [r.namespace as string, Number(r.last_ms)]));
        // As a content change with a vector: replaces any old one and clears the queue entry.
        await writeIndex(
          tx,
          ok.map((i) => ({ before: live.get(i.id)!, after: live.get(i.id)!, vector: i.vector, vectorOnly: true })),
          stamps,
        );
        return ok.length;
      });
    },

    async rebuildSearchIndex(options = {}) {
      const n = await db(() =>
        sql.begin(async (tx) => {
          await tx`SET LOCAL statement_timeout = 0`; // as long as the store is large
          return rebuildIndex(tx, options.embeddings ?? false, memoryOf);
        }),
      );
      if (options.embeddings) s.vectors.clear();
      return n;
    },
  };
}
