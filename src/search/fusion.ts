// Hybrid search: how the keyword and the semantic ranking become one. Reciprocal rank fusion gave
// a keyword hit that shares only common words the same weight as a strong semantic hit, and made
// hybrid worse than keyword alone on LoCoMo (bench/notes.md, "Hybrid fusion"). Here each list's
// scores are read for how far they stand out:
// 1. Each list (FUSION.depth hits, or the request's limit when larger) is turned into z-scores:
//    (score − mean) / standard deviation, over its first FUSION.depth hits for keyword and
//    FUSION.semanticStatsDepth for semantic. A hit that stands far above the rest of its list
//    counts for much; a list whose scores are all alike (a weak query, a weak embedder) counts
//    for little. A memory missing from a list gets that list's floor: for keyword its z-score of
//    0 (no shared word), for semantic the z-score of the list's last hit.
// 2. A memory scores the sum of its two z-scores (semantic times FUSION.semanticWeight).
// 3. Gates: the hits that stand far out of their own list come first, among themselves by the
//    same sum: keyword hits at least FUSION.keywordGateZ standard deviations above their list's
//    mean (a strong match of the query's own words is rarely wrong, and a weak embedder must not
//    push it out), and semantic hits at least FUSION.semanticGateZ above theirs (one memory that
//    means what the query asks, when the keyword list holds only weak matches of its common
//    words); at most FUSION.gateMax of each list.
// (The keyword list given here holds only hits that share a word with the query other than its
// stop words: search/service.ts.)
// The answer's score is the sum, plus FUSION.gateBonus for the gated hits (so it is higher for
// every memory ranked above another).

import { byScoreThenNewer } from "../storage/ops";
import type { Scored } from "../storage/storage";

export const FUSION = {
  /** Hits of each list that take part (more when the request's limit is larger). */
  depth: 30,
  /**
   * Semantic hits read for the list's mean and deviation: cosines are crowded, and over the first
   * 30 alone a list of near-equal scores (a weak embedder) gets large z-scores for small differences.
   */
  semanticStatsDepth: 100,
  /** z-score at or above which a keyword hit is gated to the front. */
  keywordGateZ: 1,
  /** z-score at or above which a semantic hit is gated to the front. */
  semanticGateZ: 4.5,
  /** At most this many hits of each list are gated. */
  gateMax: 5,
  /** Weight of the semantic z-score against the keyword one. */
  semanticWeight: 1,
  /** Added to a gated hit's score. */
  gateBonus: 100,
} as const;

/** Mean and standard deviation of a list's scores (1 when they are all equal). */
function spread(list: readonly Scored[]): { mean: number; sd: number } {
  if (list.length === 0) return { mean: 0, sd: 1 };
  let mean = 0;
  for (const h of list) mean += h.score;
  mean /= list.length;
  let v = 0;
  for (const h of list) v += (h.score - mean) ** 2;
  return { mean, sd: Math.sqrt(v / list.length) || 1 };
}

/** The best `limit` of a keyword and a semantic ranking, fused as described above. */
export function fuse(keyword: readonly Scored[], allSemantic: readonly Scored[], limit: number): Scored[] {
  const k = spread(keyword.slice(0, FUSION.depth));
  const s = spread(allSemantic.slice(0, FUSION.semanticStatsDepth));
  const semantic = allSemantic.slice(0, Math.max(limit, FUSION.depth));
  const kz = (score: number) => (score - k.mean) / k.sd;
  const sz = (score: number) => (FUSION.semanticWeight * (score - s.mean)) / s.sd;
  const keywordFloor = keyword.length ? kz(0) : 0;
  const semanticFloor = semantic.length ? sz(semantic[semantic.length - 1].score) : 0;
  const fused = new Map<string, { memory: Scored["memory"]; k?: number; s?: number }>();
  for (const h of keyword) fused.set(h.memory.id, { memory: h.memory, k: kz(h.score) });
  for (const h of semantic) {
    const f = fused.get(h.memory.id);
    if (f) f.s = sz(h.score);
    else fused.set(h.memory.id, { memory: h.memory, s: sz(h.score) });
  }
  const gated = new Set<string>();
  const gate = (list: readonly Scored[], z: (score: number) => number, min: number) => {
    for (let i = 0; i < list.length && i < FUSION.gateMax && z(list[i].score) >= min; i++) gated.add(list[i].memory.id);
  };
  gate(keyword, kz, FUSION.keywordGateZ);
  gate(semantic, (score) => (score - s.mean) / s.sd, FUSION.semanticGateZ);
  return [...fused.values()]
    .map((f) => ({
      memory: f.memory,
      score: (f.k ?? keywordFloor) + (f.s ?? semanticFloor) + (gated.has(f.memory.id) ? FUSION.gateBonus : 0),
    }))
    .sort(byScoreThenNewer)
    .slice(0, limit);
}
