// Keyword search as of a moment: BM25 (the same k1, b, idf and term weights as the live index,
// text/scoring.ts) over the
// versions of one entity's memories current at that moment (Storage.entityAsOf), computed here,
// since the live index holds only current content. Document statistics (count, lengths, df) are
// those of the entity at that moment, as a live search scoped to the entity uses the entity's, and
// adjacent hits lend their share as they do live (withNeighbours).
import { byScoreThenNewer, matchesFilter } from "../storage/ops";
import type { MemoryRecord } from "../storage/records";
import type { AsOfTexts, Scored, SearchFilter } from "../storage/storage";
import { bm25n, idf, lengthNormOf, NEIGHBOUR_SHARE, type QueryTerm } from "../text/scoring";
import { termCounts } from "../text/tokens";

type Counts = ReturnType<typeof termCounts>;

/**
 * Term counts by content, shared by every as-of search: most versions of a history have the
 * same content as many others (an entity's memories change rarely), so repeated searches
 * tokenize each text once. Bounded; dropped wholesale when full (simple, and refilled on use).
 */
const countsCache = new Map<string, Counts>();
const maxCached = 50_000;

function countsOf(content: string): Counts {
  let c = countsCache.get(content);
  if (c === undefined) {
    if (countsCache.size >= maxCached) countsCache.clear();
    c = termCounts(content);
    countsCache.set(content, c);
  }
  return c;
}

/** The `limit` best of `docs` for `query` (text/tokens.ts queryTerms) by BM25, best first, ties newer first. */
export function keywordAsOf(
  docs: readonly MemoryRecord[],
  query: readonly QueryTerm[],
  filter: SearchFilter,
  limit: number,
): Scored[] {
  const scores = scoreAll(docs, query);
  const hits: Scored[] = [];
  docs.forEach((memory, i) => {
    if (scores[i] > 0 && matchesFilter(memory, filter)) hits.push({ memory, score: scores[i] });
  });
  return hits.sort(byScoreThenNewer).slice(0, limit);
}

/**
 * keywordAsOf in two phases, with the same answer: every text is scored (document statistics
 * need them all), and only the best are made into versions (which reads their records), a group
 * of equal scores at a time, since ties are broken and filters applied on the versions.
 */
export async function keywordAsOfTexts(
  { texts, versions }: AsOfTexts,
  query: readonly QueryTerm[],
  filter: SearchFilter,
  limit: number,
): Promise<Scored[]> {
  const scores = scoreAll(texts, query);
  const matched: { id: string; score: number }[] = [];
  texts.forEach(({ id }, i) => {
    if (scores[i] > 0) matched.push({ id, score: scores[i] });
  });
  matched.sort((a, b) => b.score - a.score);
  const hits: Scored[] = [];
  for (let i = 0; i < matched.length && hits.length < limit; ) {
    let j = i + 1;
    while (j < matched.length && matched[j].score === matched[i].score) j++;
    const group = matched.slice(i, j);
    const vs = await versions(group.map((m) => m.id));
    const scored: Scored[] = [];
    group.forEach((m, k) => {
      const memory = vs[k];
      if (memory !== undefined && matchesFilter(memory, filter)) scored.push({ memory, score: m.score });
    });
    hits.push(...scored.sort(byScoreThenNewer));
    i = j;
  }
  return hits.slice(0, limit);
}

/**
 * Each document's score for `query` (0: it holds none of its terms): BM25 over the documents of
 * the moment, plus its adjacent hits' share, as the live engine adds it within an entity
 * (index/keyword/search.ts): the documents just before and just after it in id order (the order
 * they were stored in), when they match too, lend NEIGHBOUR_SHARE of the better one's own score.
 */
function scoreAll(docs: readonly { id: string; content: string }[], query: readonly QueryTerm[]): Float64Array {
  // A term given twice weighs its heaviest, as the live index takes it.
  const weightOf = new Map<string, number>();
  for (const q of query) weightOf.set(q.term, Math.max(weightOf.get(q.term) ?? 0, q.weight));
  const terms = [...weightOf.keys()];
  const own = new Float64Array(docs.length);
  if (docs.length === 0 || terms.length === 0) return own;
  const counts = docs.map((d) => countsOf(d.content));
  const df = new Map<string, number>(terms.map((t) => [t, 0]));
  for (const c of counts) {
    for (const t of terms) if (c.tf.has(t)) df.set(t, df.get(t)! + 1);
  }
  const avg = lengthNormOf(counts.map((c) => c.length));
  const weights = terms.map((t) => weightOf.get(t)! * idf(docs.length, df.get(t)!));
  const matched = new Uint8Array(docs.length);
  counts.forEach((c, i) => {
    terms.forEach((t, q) => {
      const tf = c.tf.get(t);
      if (tf === undefined) return;
      matched[i] = 1;
      own[i] += bm25n(weights[q], tf, c.length, avg);
    });
  });
  const order = docs.map((_, i) => i).sort((a, b) => (docs[a].id < docs[b].id ? -1 : 1));
  const scores = Float64Array.from(own);
  order.forEach((i, p) => {
    if (!matched[i]) return;
    const before = p > 0 && matched[order[p - 1]] ? own[order[p - 1]] : 0;
    const after = p + 1 < order.length && matched[order[p + 1]] ? own[order[p + 1]] : 0;
    scores[i] += NEIGHBOUR_SHARE * Math.max(before, after);
  });
  return scores;
}
