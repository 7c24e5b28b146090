// The PostgreSQL store itself: readiness (a read-only standby is not ready), figures, closing.
import { StorageError, type Upkeep } from "../storage";
import type { PgState } from "./state";
import { storageError } from "./writes";

export function pgUpkeep(s: PgState): Upkeep {
  const { sql, lockSql, read, keywordLists, vectors, searchMemory } = s;
  return {
    async notReadyReason() {
      try {
        // A database that takes no writes (a standby after a failover) is not ready either.
        const [r] = await read((sql) => sql`SELECT current_setting('transaction_read_only') AS ro`);
        if (r.ro === "on") return "the database is read-only";
        return undefined;
      } catch (e) {
        const mapped = storageError(e);
        return mapped instanceof StorageError ? mapped.message : `the database answered: ${(e as Error).message}`;
      }
    },

    async stats() {
      const [r] = await read(
        (sql) => sql`SELECT
          (SELECT count(*) FROM memories WHERE state = 'current') AS current,
          (SELECT count(*) FROM memories) AS records,
          (SELECT count(*) FROM events) AS events,
          (SELECT count(*) FROM embed_pending) AS pending`,
      );
      return {
        currentMemories: Number(r.current),
        memoryRecords: Number(r.records),
        events: Number(r.events),
        pendingEmbeddings: Number(r.pending),
        gauges: {
          ...(keywordLists
            ? {
                memd_pg_keyword_namespaces: [
                  "Namespaces whose keyword lists this process holds in memory, built.",
                  keywordLists.stats().namespaces,
                ],
                memd_pg_keyword_documents: [
                  "Memories in this process's keyword lists.",
                  keywordLists.stats().documents,
                ],
              }
            : {}),
          memd_pg_vector_namespaces: [
            "Namespaces whose vectors this process holds in memory (codes and 4-bit copies), built.",
            vectors.stats().namespaces,
          ],
          memd_pg_vector_vectors: ["Vectors in this process's in-memory copies.", vectors.stats().vectors],
          ...searchMemory.metrics().gauges,
        } as Record<string, [string, number]>,
        counters: searchMemory.metrics().counters,
      };
    },

    async close() {
      keywordLists?.close();
      vectors.close();
      await Promise.all([sql.close(), lockSql.close()]);
    },
  };
}
