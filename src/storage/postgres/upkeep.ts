// The PostgreSQL store itself: readiness (a read-only standby is not ready), figures, closing.
import { StorageError, type Upkeep } from "../storage";
import type { PgState } from "./state";
import { storageError } from "./writes";

export function pgUpkeep(s: PgState): Upkeep {
  const { sql, lockSql, read, keywordLists, vectors, searchMemory, preload } = s;
  return {
    async notReadyReason() {
      try {
        // A database that takes no writes (a standby after a failover) is not ready either.
        const [r] = await read((sql) => sql`SELECT current_setting('transaction_read_only') AS ro`);
        if (r.ro === "on") return "the database is read-only";
        // Ready once the namespaces whose snapshots it read answer from memory (snapshots.ts).
        return preload?.reason();
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
          memd_pg_entity_list_entries: [
            "Memories of the entities listed most, kept in this process's memory for list reads and the context block (postgres/entity-lists.ts).",
            s.entityLists.entries,
          ],
        } as Record<string, [string, number]>,
        counters: {
          ...searchMemory.metrics().counters,
          ...(keywordLists
            ? {
                memd_pg_keyword_snapshots_read_total: [
                  "Keyword snapshots this process read from the database instead of building the lists.",
                  keywordLists.snapshots.read,
                ],
                memd_pg_keyword_snapshots_written_total: [
                  "Keyword snapshots this process wrote to the database.",
                  keywordLists.snapshots.written,
                ],
              }
            : {}),
          memd_pg_vector_snapshots_read_total: [
            "Vector snapshots this process read from the database instead of building the copies.",
            vectors.snapshots.read,
          ],
          memd_pg_vector_snapshots_written_total: [
            "Vector snapshots this process wrote to the database.",
            vectors.snapshots.written,
          ],
        },
      };
    },

    async close() {
      keywordLists?.close();
      vectors.close();
      // Bounded: a query still running now was given up by its caller at its deadline (or runs
      // past the statement timeout), and one sent to a database gone silent would hold close()
      // until TCP gives up on it, minutes after the network came back.
      const bound = { timeout: Math.ceil(s.statementTimeoutMs / 1000) };
      await Promise.all([sql.close(bound), lockSql.close(bound)]);
    },
  };
}
