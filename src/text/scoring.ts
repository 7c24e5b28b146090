// Keyword scoring, the one definition both storage backends use (LMDB in JS: storage/lmdb/search.ts;
// PostgreSQL in SQL built from these constants: storage/postgres/search.ts). Okapi BM25 with a
// weight per query term: a query's stop words count STOP_WORD_WEIGHT of a word's, the rest 1.
// The constants were measured on the LoCoMo dev half and BEAM's 100K chats (bench/notes.md).

/**
 * BM25 parameters: k1 = 1.2 (term-frequency saturation), b = 0.75 (length normalisation, the
 * textbook value). Issue 21 had b = 0.25, chosen on LoCoMo's short turns, where a longer turn is
 * more often the one that holds the answer; on long memories (BEAM's messages of thousands of
 * characters) it ranked a long answer first for any question that shares a few of its words
 * (BEAM 100K hit@5 0.216). With adjacent hits lending their scores (NEIGHBOUR_SHARE) b = 0.75 is
 * as good on LoCoMo and far better on BEAM (bench/notes.md, issue 36).
 */
export const BM25 = { k1: 1.2, b: 0.75 } as const;

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
export const bm25 = (idfValue: number, tf: number, length: number, avgLength: number): number =>
  (idfValue * (tf * (BM25.k1 + 1))) / (tf + BM25.k1 * (1 - BM25.b + (BM25.b * length) / (avgLength || 1)));

/**
 * The same score as SQL, summed over postings `p` (columns tf, doc_len, df, weight) joined with
 * stats `st` (docs, avg): one expression, so PostgreSQL's ranking is this module's.
 */
export const bm25Sql = (p: string, st: string): string => {
  const { k1, b } = BM25;
  return `sum(${p}.weight * ln(1 + (${st}.docs - ${p}.df + 0.5) / (${p}.df + 0.5))
              * (${p}.tf * ${k1 + 1}) / (${p}.tf + ${k1} * (1 - ${b} + ${b} * ${p}.doc_len / ${st}.avg)))`;
};
