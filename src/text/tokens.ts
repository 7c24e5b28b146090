// Words for the keyword index: Unicode word segmentation (Intl.Segmenter), folded for case and
// accents, so that "Café" and "cafe" are one term. Text in scripts written without spaces
// (Chinese, Japanese, Thai…) is cut by the segmenter's dictionary; for Han, kana and Hangul runs
// character bigrams are added as well, so a query still matches when the segmenter cuts the
// query and the memory differently. Generic: storage and features both import it.

const segmenter = new Intl.Segmenter("und", { granularity: "word" });
const marks = /\p{M}+/gu;
const cjk = /[\p{Script=Han}\p{Script=Hiragana}\p{Script=Katakana}\p{Script=Hangul}]/u;
/** Terms are cut to this many UTF-16 units, so that index keys stay well under LMDB's limit. */
export const MAX_TERM_LENGTH = 64;

/** Lower case leaves these apart from their case folding (Unicode CaseFolding.txt, full). */
const unfolded = /[ßς]/g;
const folding: Record<string, string> = { ß: "ss", ς: "σ" };

/**
 * Case- and accent-folded form of a text: NFKD, combining marks removed, lower case, and the
 * full case folding of ß (STRASSE finds Straße) and final sigma.
 */
export const fold = (text: string): string =>
  text
    .normalize("NFKD")
    .replace(marks, "")
    .toLowerCase()
    .replace(unfolded, (c) => folding[c]);

/**
 * Plain ASCII text where no punctuation sits between two letters or digits, and no underscore:
 * there the word boundaries of Unicode segmentation (UAX #29) are simply the runs of letters and
 * digits, since only "." "," ";" ":" "'" (between letters or digits) and "_" join words in ASCII.
 */
const plainAscii = /^[\t\n\r\x20-\x5e\x60-\x7e]*$/;
const joined = /[A-Za-z0-9][.,;:'][A-Za-z0-9]/;
const asciiWord = /[a-z0-9]+/g;

/** The terms of a text in order, repeats kept (term frequency counts them). */
export function tokenize(text: string): string[] {
  // The common case, without the segmenter (about 10x faster; same terms: test/tokens.test.ts).
  if (plainAscii.test(text) && !joined.test(text)) {
    const words = text.toLowerCase().match(asciiWord) ?? [];
    for (let i = 0; i < words.length; i++)
      if (words[i].length > MAX_TERM_LENGTH) words[i] = words[i].slice(0, MAX_TERM_LENGTH);
    return words;
  }
  return segmented(text);
}

/** tokenize by Intl.Segmenter: any text. */
export function segmented(text: string): string[] {
  const out: string[] = [];
  let run = ""; // the current run of CJK characters across adjacent segments
  const flushRun = () => {
    const chars = [...run];
    if (chars.length === 1) out.push(run); // a lone character is its own term
    for (let i = 0; i + 1 < chars.length; i++) out.push(chars[i] + chars[i + 1]);
    run = "";
  };
  for (const s of segmenter.segment(fold(text))) {
    if (!s.isWordLike) {
      flushRun();
      continue;
    }
    const word = s.segment;
    if (cjk.test(word)) {
      // The segmenter's word, plus bigrams over the whole run (added when the run ends).
      if ([...word].length > 1) out.push(word.slice(0, MAX_TERM_LENGTH));
      run += word;
      continue;
    }
    flushRun();
    out.push(word.slice(0, MAX_TERM_LENGTH));
  }
  flushRun();
  return out;
}

/** Term frequencies of a text and its length in terms. */
export function termCounts(text: string): { tf: Map<string, number>; length: number } {
  const terms = tokenize(text);
  const tf = new Map<string, number>();
  for (const t of terms) tf.set(t, (tf.get(t) ?? 0) + 1);
  return { tf, length: terms.length };
}

/** The distinct terms of a query, in first-seen order. */
export const queryTerms = (query: string): string[] => [...new Set(tokenize(query))];

/** BM25 parameters: k1 = 1.2 (term-frequency saturation), b = 0.75 (length normalisation). */
export const BM25 = { k1: 1.2, b: 0.75 } as const;

/** Okapi BM25 idf, never negative: ln(1 + (N − df + 0.5) / (df + 0.5)). */
export const idf = (docs: number, df: number): number => Math.log(1 + (docs - df + 0.5) / (df + 0.5));

/** One term's BM25 contribution for a document of `length` terms where the term occurs `tf` times. */
export const bm25 = (idfValue: number, tf: number, length: number, avgLength: number): number =>
  (idfValue * (tf * (BM25.k1 + 1))) / (tf + BM25.k1 * (1 - BM25.b + (BM25.b * length) / (avgLength || 1)));

/** The most any one document can get from a term: idf × (k1 + 1). */
export const bm25Bound = (idfValue: number): number => idfValue * (BM25.k1 + 1);
