// The LMDB store itself: readiness (open, readable, room in the map, a writable data dir),
// figures for /metrics, closing.
import { accessSync, constants } from "node:fs";
import type { Database } from "lmdb";
import type { Upkeep } from "../storage";
import { sharedStructuresKey } from "./env";
import { flushed, type LmdbState } from "./state";

export function lmdbUpkeep(s: LmdbState): Upkeep {
  const { dataDir, env, dbs, vectorCache, keywordCache, searchMemory, entityLists } = s;
  return {
    async notReadyReason() {
      // isOperational() is in lmdb-js (status "open") but missing from its type declarations.
      if (!(env as unknown as { isOperational(): boolean }).isOperational()) return "the store is not open";
      try {
        // A real read transaction: fails if the environment is broken underneath us.
        dbs.events.getKeys({ reverse: true, limit: 1 }).asArray;
      } catch (e) {
        return `the store cannot be read: ${(e as Error).message}`;
      }
      const s = env.getStats() as { pageSize: number; lastPageNumber: number; mapSize: number };
      // Writes start failing with MDB_MAP_FULL near the end of the map; say so before they do.
      if ((s.lastPageNumber + 1) * s.pageSize > s.mapSize * 0.99) return "the store is full; raise --map-size-mb";
      try {
        accessSync(dataDir, constants.W_OK);
      } catch (e) {
        return `the store cannot be written: ${(e as Error).message}`;
      }
      return undefined;
    },

    async stats() {
      const s = env.getStats() as { pageSize: number; lastPageNumber: number; mapSize: number };
      // A msgpack sub-database's shared structures are one entry more, outside every range: not a record.
      const count = (db: Database) =>
        (db.getStats() as { entryCount: number }).entryCount - (db.get(sharedStructuresKey) === undefined ? 0 : 1);
      // (What the lists hold counts the commits acknowledged so far: they follow them in batches.)
      keywordCache.follow();
      const memory = searchMemory.metrics();
      return {
        currentMemories: count(dbs.entityMemories),
        memoryRecords: count(dbs.memories),
        events: count(dbs.events),
        pendingEmbeddings: count(dbs.embedPending),
        gauges: {
          memd_lmdb_map_size_bytes: ["Largest size the LMDB file may grow to.", s.mapSize],
          memd_lmdb_used_bytes: [
            "Pages in use in the LMDB file (last page number x page size).",
            (s.lastPageNumber + 1) * s.pageSize,
          ],
          ...memory.gauges,
          memd_lmdb_entity_list_entries: [
            "Memories of the entities listed most, kept in memory for list reads and the context block (lmdb/entity-lists.ts).",
            entityLists.entries,
          ],
        },
        counters: {
          ...memory.counters,
          ...keywordCache.counters(),
          memd_vector_snapshots_read_total: [
            "Vector snapshots read at a namespace's first semantic search instead of every vector (lmdb/vector-snapshot.ts).",
            vectorCache.snapshotStats.read,
          ],
          memd_vector_snapshots_written_total: ["Vector snapshots written.", vectorCache.snapshotStats.written],
        },
      };
    },

    async close() {
      keywordCache.stop();
      vectorCache.stop();
      await keywordCache.save();
      await vectorCache.save();
      vectorCache.clear();
      keywordCache.clear();
      await flushed(s);
      await env.close();
    },
  };
}
