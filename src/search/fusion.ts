// Hybrid search: how the keyword and the semantic ranking become one. Reciprocal rank fusion gave
// a keyword hit that shares only common words the same weight as a strong semantic hit, and made
// hybrid worse than keyword alone on LoCoMo (bench/notes.md, "Hybrid fusion"). Here each list's
// scores are read for how far they stand out, and the semantic list counts as much as the
// embedding model has shown it knows meaning (probe.ts):
// 1. Each list (FUSION.depth hits, or the request's limit when larger) is turned into z-scores:
//    (score − mean) / standard deviation, over its first FUSION.depth hits for keyword and
//    FUSION.semanticStatsDepth for semantic. A hit that stands far above the rest of its list
//    counts for much; a list whose scores are all alike (a weak query) counts for little. A memory
//    missing from a list gets that list's floor: for keyword its z-score of 0 (no shared word), for
//    semantic the z-score of the list's last hit.
// 2. A memory scores its keyword z-score plus w times its semantic one, w = FUSION.semanticWeight
//    times the model's probe share (the share of paraphrases it ranks above look-alikes). A lexical
//    model (share 0) so never reorders keyword's hits: it would reorder them by word overlap,
//    which BM25 already ranks better. A memory only semantic found is weighed at least
//    FUSION.semanticOnlyMinWeight, so that those stay in the semantic order among themselves.
// 3. Gates: the hits that stand far out of their own list come first, among themselves by the
//    same sum: keyword hits at least FUSION.keywordGateZ standard deviations above their list's
//    mean that share a word with the query other than its stop words (a strong match of the
//    query's own words is rarely wrong), and semantic hits at least FUSION.semanticGateZ above
//    theirs when the model's share is above 0 (one memory that means what the query asks, when
//    the keyword list holds only weak matches; a lexical model's standout hit is a word overlap,
//    which keyword ranks better: with it, hybrid fell 0.002 below keyword's hit@10 on LoCoMo once
//    keyword ranked adjacent hits, issue 36); at most FUSION.gateMax of each list.
// A keyword list none of whose hits shares a word with the query other than its stop words is no
// evidence and takes no part: the answer is then the semantic ranking.
// The answer's score is the sum, plus FUSION.gateBonus for the gated hits (so it is higher for
// every memory ranked above another, but for ties, which go to the newer).

import { byScoreThenNewer } from "../storage/ops";
import type { Scored } from "../storage/storage";

export const FUSION = {
  /** Hits of each list that take part (more when the request's limit is larger). */
  depth: 30,
  /**
   * Semantic hits read for the list's mean and deviation: cosines are crowded, and over the first
   * 30 alone a list of near-equal scores gets large z-scores for small differences.
   */
  semanticStatsDepth: 100,
  /** z-score at or above which a keyword hit is gated to the front. */
  keywordGateZ: 1,
  /** z-score at or above which a semantic hit is gated to the front. */
  semanticGateZ: 4.5,
  /** At most this many hits of each list are gated. */
  gateMax: 5,
  /**
   * Weight of the semantic z-score for a model that ranks every probe right (times its share).
   * 1.25 with issue 21's keyword ranking; once keyword ranked adjacent hits with the scope's b
   * (issue 36) USE-lite's hybrid fell below keyword alone (hit@5 / hit@10 0.675 / 0.777 against
   * 0.678 / 0.783 on LoCoMo's dev half); at 0.6 it is 0.681 / 0.787 (bench/notes.md).
   */
  semanticWeight: 0.6,
  /** Least weight of the semantic z-score of a memory that only semantic found. */
  semanticOnlyMinWeight: 0.05,
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

export interface FuseOptions {
  /** The embedding model's probe share, 0 to 1 (probe.ts). */
  share: number;
  /** Whether a keyword hit shares a word with the query other than its stop words (only those are gated). */
  sharesContentWord: (memory: Scored["memory"]) => boolean;
  /**
   * The built-in embedder's fusion (service.ts), a weak semantic list beside a strong keyword
   * one, so that it can only add to keyword's answers:
   * - keyword's first `keywordHead` hits keep their places, ahead of the rest, in keyword's
   *   order, so hybrid's first five are keyword's whatever the semantic list says, when at least
   *   `keywordHead` of its hits share a content word with the query. A hit sharing only stop
   *   words is then often the turn after a strong hit, lent its score (text/scoring.ts
   *   NEIGHBOUR_SHARE): ending the head at the last hit sharing a content word lost two LoCoMo
   *   dev questions at hit@5. A list with fewer is thin: its hits sharing a content word keep
   *   their places, and those sharing only stop words are filler, weighed as if keyword had not
   *   found them, so that the semantic list fills those places ("where does the user live": "My
   *   sister lives in Toronto", then "My grandfather fought in the war" for its "the"). LoCoMo
   *   dev, evidence in the top 5 against keyword's: turns equal, observations one more;
   *   bench/paraphrase-set.json's top 3 0.633 -> 0.683 (bench/notes.md);
   * - the rest are ranked by the sum above, where a keyword hit's semantic z-score is its own
   *   wherever it stands in the semantic list read (FUSION.semanticStatsDepth hits) and one not
   *   in it gets the z-score of that list's last hit (it scored lower than all of them), not
   *   of the FUSION.depth-th: so the semantic list reorders keyword's deeper hits by their
   *   meaning, which is where it finds what keyword ranked too low (LoCoMo dev: bench/notes.md).
   */
  keywordHead?: number;
  /**
   * How many of keyword's first hits keep their places, ahead of the rest, when the list is not
   * thin (keywordHead when not given; thinness is still judged against keywordHead): the context
   * block's, so that a hybrid block holds what a keyword block of its budget holds
   * (context/service.ts TOKENS_PER_KEPT_HIT). Any embedder.
   */
  keywordKept?: number;
}

/** The best `limit` of a keyword and a semantic ranking, fused as described above. */
export function fuse(
  allKeyword: readonly Scored[],
  allSemantic: readonly Scored[],
  limit: number,
  o: FuseOptions,
): Scored[] {
  // Hits that share only stop words with the query, and none that shares more: no evidence.
  const keyword = allKeyword.some((h) => o.sharesContentWord(h.memory)) ? allKeyword : [];
  const k = spread(keyword.slice(0, FUSION.depth));
  const s = spread(allSemantic.slice(0, FUSION.semanticStatsDepth));
  const semantic = allSemantic.slice(0, Math.max(limit, FUSION.depth));
  const kz = (score: number) => (score - k.mean) / k.sd;
  const sz = (score: number) => (score - s.mean) / s.sd;
  const w = FUSION.semanticWeight * Math.min(1, Math.max(0, o.share));
  const wOnly = Math.max(w, FUSION.semanticOnlyMinWeight);
  const keywordFloor = keyword.length ? kz(0) : 0;
  const head = o.keywordHead ?? 0;
  // A thin keyword list (keywordHead): its hits sharing only stop words are no evidence.
  const thin = head > 0 && keyword.filter((h) => o.sharesContentWord(h.memory)).length < head;
  const filler = (m: Scored["memory"]) => thin && !o.sharesContentWord(m);
  // With a keyword head (the built-in embedder), the whole semantic list read is known.
  const known = head > 0 ? allSemantic.slice(0, FUSION.semanticStatsDepth) : semantic;
  const semanticFloor = known.length ? sz(known[known.length - 1].score) : 0;
  const fused = new Map<string, { memory: Scored["memory"]; k?: number; s?: number }>();
  for (const h of keyword) fused.set(h.memory.id, { memory: h.memory, k: filler(h.memory) ? undefined : kz(h.score) });
  if (head > 0)
    for (const h of known) {
      const f = fused.get(h.memory.id);
      if (f) f.s = sz(h.score);
    }
  for (const h of semantic) {
    const f = fused.get(h.memory.id);
    if (f) f.s = sz(h.score);
    else fused.set(h.memory.id, { memory: h.memory, s: sz(h.score) });
  }
  const gated = new Set<string>();
  for (let i = 0, n = 0; i < keyword.length && n < FUSION.gateMax && kz(keyword[i].score) >= FUSION.keywordGateZ; i++)
    if (o.sharesContentWord(keyword[i].memory)) {
      gated.add(keyword[i].memory.id);
      n++;
    }
  // Only a model that has shown it knows meaning (share > 0): a lexical one's standout hit is a
  // word overlap, which the keyword list already ranks (and better).
  if (w > 0)
    for (let i = 0; i < semantic.length && i < FUSION.gateMax && sz(semantic[i].score) >= FUSION.semanticGateZ; i++)
      gated.add(semantic[i].memory.id);
  // Keyword's head: above every gated hit, in keyword's order (a thin list's: its evidence only).
  const kept = Math.max(head, o.keywordKept ?? head);
  const headHits = thin ? keyword.filter((h) => !filler(h.memory)) : keyword.slice(0, kept);
  const headRank = new Map(headHits.map((h, i) => [h.memory.id, kept - i]));
  return [...fused.values()]
    .map((f) => ({
      memory: f.memory,
      score:
        (f.k === undefined ? keywordFloor + wOnly * (f.s ?? semanticFloor) : f.k + w * (f.s ?? semanticFloor)) +
        (gated.has(f.memory.id) ? FUSION.gateBonus : 0) +
        2 * FUSION.gateBonus * (headRank.get(f.memory.id) ?? 0),
    }))
    .sort(byScoreThenNewer)
    .slice(0, limit);
}
