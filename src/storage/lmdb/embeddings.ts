// The LMDB embedding queue and vectors (written through search.ts's IndexWriter), and rebuilding
// the search index.
import { isCurrent } from "../records";
import type { Embeddings } from "../storage";
import { rebuildIndex } from "./migrate";
import { IndexWriter } from "./search";
import { flushed, getRecord, type LmdbState } from "./state";
import { write } from "./writes";

export function lmdbEmbeddings(s: LmdbState): Embeddings {
  const { env, dbs, vectorCache, keywordCache } = s;
  return {
    async pendingEmbeddings(limit) {
      const now = Date.now();
      const out = [];
      for (const id of dbs.embedPending.getKeys({ limit: limit * 2 })) {
        const r = getRecord(s, id as string);
        if (isCurrent(r, now)) out.push({ id: r.id, content: r.content, updatedAt: r.updatedAt });
        if (out.length >= limit) break;
      }
      return out;
    },

    async setVectors(items) {
      return write(s, (w) => {
        const ix = new IndexWriter(dbs, w);
        let n = 0;
        for (const it of items) {
          const r = getRecord(s, it.id);
          if (r?.state !== "current" || r.updatedAt !== it.updatedAt || dbs.embedPending.get(it.id) === undefined)
            continue;
          ix.setVector(r, it.vector);
          n++;
        }
        // A new mark for each commit of the worker's (whose vectors come without an event): a vector
        // snapshot taken at another mark catches up by walking its namespace's keys (vector-cache.ts).
        if (n > 0) w.put(dbs.meta, "vectorMark", Math.random());
        return n;
      });
    },

    async rebuildSearchIndex(options = {}) {
      let n = 0;
      await env.transaction(() => {
        n = rebuildIndex(dbs, options.embeddings ?? false);
        // Keyword snapshots of the index before are no longer caught up by its events.
        dbs.meta.putSync("searchEpoch", ((dbs.meta.get("searchEpoch") as number | undefined) ?? 0) + 1);
      });
      vectorCache.clear();
      keywordCache.clear();
      await flushed(s);
      return n;
    },
  };
}
