// The PostgreSQL embedding queue and vectors (written through search.ts), and rebuilding the
// search index.
import type { MemoryRecord } from "../records";
import type { Embeddings } from "../storage";
import { memoryOf, type Row } from "./rows";
import { rebuildIndex, writeIndex } from "./search";
import type { PgState } from "./state";

export function pgEmbeddings(s: PgState): Embeddings {
  const { sql, db, write } = s;
  return {
    async pendingEmbeddings(limit) {
      const rows = await db(
        () => sql`SELECT m.id, m.content, m.updated_at FROM embed_pending p JOIN memories m ON m.id = p.memory_id
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
        // As a content change with a vector: replaces any old one and clears the queue entry.
        await writeIndex(
          tx,
          ok.map((i) => ({ before: live.get(i.id)!, after: live.get(i.id)!, vector: i.vector, vectorOnly: true })),
        );
        return ok.length;
      });
    },

    async rebuildSearchIndex(options = {}) {
      return db(() => sql.begin((tx) => rebuildIndex(tx, options.embeddings ?? false, memoryOf)));
    },
  };
}
