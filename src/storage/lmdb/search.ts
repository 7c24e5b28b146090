// The LMDB search index: BM25 postings and their statistics, vectors and the embedding queue,
// kept in the write transaction of the change they follow by index-writer.ts (see layout.ts for
// the keys).

import { keywordSearch } from "../../index/keyword";
import { ann, exactReads, topIndexes, type VectorSpace } from "../../index/vector";
import { byScoreThenNewer, matchesFilter, normalized } from "../ops";
import { isCurrent, type MemoryRecord } from "../records";
import type { MemoryScope, Scored, Search, SearchFilter } from "../storage";
import type { Dbs } from "./layout";
import type { LmdbState } from "./state";

/** The best `limit` accepted candidates, ties newer first (ties at the cut are all looked at). */
function topAccepted(
  scores: Map<string, number>,
  accept: (id: string) => MemoryRecord | null,
  limit: number,
): Scored[] {
  const sorted = [...scores].sort((a, b) => b[1] - a[1]);
  const out: Scored[] = [];
  for (const [id, score] of sorted) {
    if (out.length >= limit && score < out[limit - 1].score) break;
    const m = accept(id);
    if (m) out.push({ memory: m, score });
  }
  return out.sort(byScoreThenNewer).slice(0, limit);
}

/**
 * `exactOnly` true (bench/vectors.ts' same-run baseline only): the codes' candidates are all
 * scored exactly, each read from LMDB, as before the 4-bit copy.
 */
export const lmdbVectors = { exactOnly: false };

/**
 * Cosine top-k over a scope, on the namespace's in-memory codes and 4-bit copy (src/index/vector/space.ts,
 * four-bit.ts, vector-cache.ts). A scope of at most `ann.rescore` vectors is scored whole,
 * each vector read from LMDB: exact. Beyond, the nearest codes' candidates are ranked by their
 * 4-bit vectors and only the best `exactReads(limit)` are read from LMDB and scored exactly, then
 * more (×4 each time) while fewer than `limit` of them pass: every score answered is the exact
 * cosine. Candidates are checked against their memory record, so a memory that is no longer
 * current is never returned; when too few pass among the candidates, more are asked for, up to
 * the whole scope.
 */
export function semanticSearch(
  dbs: Dbs,
  space: VectorSpace,
  scope: MemoryScope,
  query: Float32Array,
  filter: SearchFilter,
  limit: number,
  now: number,
): Scored[] {
  const q = normalized(query);
  const scores = new Map<string, number>();
  const accept = (id: string) => {
    const m = dbs.memories.get(id) as MemoryRecord | undefined;
    return isCurrent(m, now) && m.namespace === scope.namespace && matchesFilter(m, filter) ? m : null;
  };
  const first = exactReads(limit);
  const seen = new Set<string>(); // scored exactly (approximate path)
  const out: Scored[] = [];
  for (let want = Math.max(first, ann.rescore); ; want *= 4) {
    const { ids, sims, all, byRead } = space.nearest(scope.entity, q, want, lmdbVectors.exactOnly);
    if (byRead) {
      // Exact scores already: only the best few are worth sorting and checking; widen until
      // `limit` pass or all are seen.
      for (let check = limit * 4 + 16; ; check *= 4) {
        const order = topIndexes(sims, check);
        scores.clear();
        for (const j of order) scores.set(ids[j], sims[j]);
        const found = topAccepted(scores, accept, limit);
        if (found.length >= limit) return found;
        if (order.length >= sims.length) {
          if (all) return found;
          break;
        }
      }
      continue;
    }
    // Ranked by the 4-bit copy: the best `first` read exactly, then 4× more, until `limit` pass.
    const order = Array.from(ids.keys()).sort((a, b) => sims[b] - sims[a]);
    for (let from = 0, to = first; from < order.length; from = to, to *= 4) {
      const batch: string[] = [];
      const records: MemoryRecord[] = [];
      for (const i of order.slice(from, to)) {
        const id = ids[i];
        if (seen.has(id)) continue;
        seen.add(id);
        const m = accept(id);
        if (!m) continue;
        batch.push(id);
        records.push(m);
      }
      const exact = space.score(batch, q);
      for (let i = 0; i < batch.length; i++)
        if (!Number.isNaN(exact[i])) out.push({ memory: records[i], score: exact[i] });
      if (out.length >= limit) return out.sort(byScoreThenNewer).slice(0, limit);
    }
    if (all) return out.sort(byScoreThenNewer).slice(0, limit);
  }
}

/** The Search role: each namespace's in-memory keyword lists and vectors (state.ts), scored above. */
export function lmdbSearch(s: LmdbState): Search {
  const { dbs, keywordCache, vectorCache } = s;
  return {
    async keywordSearch(scope, terms, filter, limit, now = Date.now(), share = 0) {
      const space = await keywordCache.get(scope.namespace);
      return keywordSearch(
        space,
        scope,
        terms,
        limit,
        (id) => {
          const m = dbs.memories.get(id) as MemoryRecord | undefined;
          return isCurrent(m, now) && m.namespace === scope.namespace && matchesFilter(m, filter) ? m : null;
        },
        share,
      );
    },

    async semanticSearch(scope, vector, filter, limit, now = Date.now()) {
      return semanticSearch(dbs, await vectorCache.get(scope.namespace), scope, vector, filter, limit, now);
    },
  };
}
