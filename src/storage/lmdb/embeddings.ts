// The LMDB embedding queue and vectors (written through index-writer.ts's IndexWriter), and
// rebuilding the search index. The built-in embedder's thread writes vectors on its own handle of
// the same environment (vectors-elsewhere.ts), so that the thread serving requests does not.
import type { Embeddings } from "../storage";
import { latestCommitOrder } from "./commit-order";
import { rebuildIndex } from "./migrate";
import { flushed, type LmdbState } from "./state";
import { pendingIn, stageVectors } from "./vectors-elsewhere";
import { write } from "./writes";

export function lmdbEmbeddings(s: LmdbState, mapSizeMb?: number): Embeddings {
  const { env, dbs, vectorCache, keywordCache } = s;
  return {
    async pendingEmbeddings(limit) {
      return pendingIn(dbs, limit);
    },

    async setVectors(items) {
      return write(s, (w) => stageVectors(dbs, w, items).n);
    },

    vectorsElsewhere: {
      dataDir: s.dataDir,
      mapSizeMb,
      begin() {
        // A write in flight, as write() counts one: no vector snapshot takes the store's mark
        // while a vector is committed and not yet followed here.
        const token = {};
        s.inflight.set(token, s.clock.handedOut);
        return (touched) => {
          try {
            // This thread's reads from here on see that thread's commit (lmdb-js renews a read
            // transaction on a timer, which a search may come before).
            env.resetReadTxn();
            // (Ordered after every commit of this thread so far: see NamespaceCache.refresh.)
            vectorCache.refresh(touched, latestCommitOrder());
          } finally {
            s.inflight.delete(token);
          }
        };
      },
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
