// Keyword scoring, the one definition both storage backends use (LMDB in JS: storage/lmdb/search.ts;
// PostgreSQL in SQL built from these constants: storage/postgres/search.ts). Okapi BM25 with a
// weight per query term: a query's stop words count STOP_WORD_WEIGHT of a word's, the rest 1.
// The constants were measured on the LoCoMo dev half and BEAM's 100K chats (bench/notes.md).

/**
 * BM25 parameters: k1 = 1.2 (term-frequency saturation); b (length normalisation) is the scope's
 * own, lengthNormB, on both backends; BM25.b (issue 21's value, chosen on LoCoMo's short turns)
 * only where a scope has no length at all.
 */
export const BM25 = { k1: 1.2, b: 0.25 } as const;

/**
 * The scope's length normalisation: the coefficient of variation of its memories' lengths
 * (standard deviation over mean, in index terms), at most 1. Where memories are all about as long
 * (a conversation's turns: about 0.5), a longer one more often holds more, and length is lightly
 * normalised; where lengths vary widely (short notes beside assistant answers of thousands of
 * words: 0.7 to 0.9), a long memory is mostly long-winded, and matching a few of its words says
 * little. Issue 21's fixed b = 0.25, chosen on LoCoMo's short turns, ranked BEAM's longest answers
 * first (hit@5 0.216); the textbook 0.75 lost LoCoMo's short turns (bench/notes.md, issue 36).
 * `docs` memories whose lengths sum to `total` and whose squares sum to `squares`.
 */
export function lengthNormB(docs: number, total: number, squares: number): number {
  if (docs === 0 || total === 0) return BM25.b;
  const mean = total / docs;
  const sd = Math.sqrt(Math.max(0, squares / docs - mean * mean));
  return Math.min(1, sd / mean);
}

/** A scope's length statistics for BM25: average length and b (lengthNormB). */
export interface LengthNorm {
  avg: number;
  b: number;
}

/** The LengthNorm of a list of lengths. */
export function lengthNormOf(lengths: readonly number[]): LengthNorm {
  let total = 0;
  let squares = 0;
  for (const l of lengths) {
    total += l;
    squares += l * l;
  }
  return { avg: lengths.length ? total / lengths.length : 0, b: lengthNormB(lengths.length, total, squares) };
}

/**
 * What a query's stop word weighs against its other words. Not 0: stopwords-iso's lists hold
 * words that carry meaning in a question ("group", "work", "new", "home"); left out, LoCoMo's
 * hit@5 was 0.596, at 0.35 of a word 0.628 (at 1, as any word, 0.591).
 */
export const STOP_WORD_WEIGHT = 0.35;

/**
 * The share of an adjacent hit's score a hit gains: a memory's score is its BM25 plus this times
 * the better BM25 of the memories stored just before and just after it in its entity, when they
 * hold a query term too (index/keyword/search.ts). In a conversation the answer is often in the
 * turn next to the one that shares the question's words ("What did Caroline research?" matches
 * the question Melanie asked; Caroline's reply holds the answer); a run of matching memories so
 * rises together, and a lone match of a common word does not. A memory that holds no query term
 * is never added. Measured on LoCoMo's dev half and BEAM's 100K chats (bench/notes.md, issue 36).
 */
export const NEIGHBOUR_SHARE = 0.5;

/** A query term and its weight (1, or STOP_WORD_WEIGHT), as text/tokens.ts queryTerms makes them. */
export interface QueryTerm {
  term: string;
  weight: number;
}

/** Okapi BM25 idf, never negative: ln(1 + (N − df + 0.5) / (df + 0.5)). */
export const idf = (docs: number, df: number): number => Math.log(1 + (docs - df + 0.5) / (df + 0.5));

/**
 * One term's BM25 contribution for a document of `length` terms where the term occurs `tf` times;
 * `idfValue` is the term's idf times its weight.
 */
export const bm25 = (idfValue: number, tf: number, length: number, avgLength: number, b: number = BM25.b): number =>
  (idfValue * (tf * (BM25.k1 + 1))) / (tf + BM25.k1 * (1 - b + (b * length) / (avgLength || 1)));

/** bm25 with a scope's LengthNorm. */
export const bm25n = (idfValue: number, tf: number, length: number, n: LengthNorm): number =>
  bm25(idfValue, tf, length, n.avg, n.b);

/**
 * lengthNormB as SQL, over float8 columns `docs`, `avg` (total / docs) and `squares` of `st`: the
 * same operations in the same order, so both backends compute the same b.
 */
export const lengthNormBSql = (st: string): string =>
  `CASE WHEN ${st}.docs = 0 OR ${st}.avg = 0 THEN ${BM25.b}
        ELSE least(1, sqrt(greatest(0, ${st}.squares / ${st}.docs - ${st}.avg * ${st}.avg)) / ${st}.avg) END`;

/**
 * The same score as SQL, summed over postings `p` (columns tf, doc_len, df, weight) joined with
 * stats `st` (docs, avg, b: lengthNormBSql): one expression, so PostgreSQL's ranking is this module's.
 */
export const bm25Sql = (p: string, st: string): string => {
  const { k1 } = BM25;
  return `sum(${p}.weight * ln(1 + (${st}.docs - ${p}.df + 0.5) / (${p}.df + 0.5))
              * (${p}.tf * ${k1 + 1}) / (${p}.tf + ${k1} * (1 - ${st}.b + ${st}.b * ${p}.doc_len / ${st}.avg)))`;
};
