// Words for the keyword index: Unicode word segmentation (Intl.Segmenter), folded for case and
// accents, so that "Café" and "cafe" are one term. Text in scripts written without spaces
// (Chinese, Japanese, Thai…) is cut by the segmenter's dictionary; for Han, kana and Hangul runs
// character bigrams are added as well, so a query still matches when the segmenter cuts the
// query and the memory differently. Then each word is stemmed by the Snowball stemmer of the
// text's language (language.ts; a text of no language keeps its words as they are), and a query
// weighs its stop words less (see queryTerms). Generic: storage and features both import it.
import { fold } from "./fold";
import { detectLanguage, isStopWord, languages, stem, stemAscii, stemText } from "./language";
import { type QueryTerm, STOP_WORD_WEIGHT } from "./scoring";

export { fold };

const segmenter = new Intl.Segmenter("und", { granularity: "word" });
const cjk = /[\p{Script=Han}\p{Script=Hiragana}\p{Script=Katakana}\p{Script=Hangul}]/u;
/** Terms are cut to this many UTF-16 units, so that index keys stay well under LMDB's limit. */
export const MAX_TERM_LENGTH = 64;

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

/**
 * The index terms of a text in order: its words (tokenize), stemmed in the text's language. With
 * `ids` (emptied first), a plain ASCII text's terms' numbers too (language.ts: one number names
 * one term for the process's life); any other text's are left out (ids stays empty).
 */
export function indexTerms(text: string, ids?: number[]): string[] {
  if (ids) ids.length = 0;
  if (plainAscii.test(text) && !joined.test(text)) return stemAscii(text, MAX_TERM_LENGTH, ids);
  const words = tokenize(text);
  stemText(words);
  return words;
}

/** Index term frequencies of a text and its length in terms. */
export function termCounts(text: string): { tf: Map<string, number>; length: number } {
  const terms = indexTerms(text);
  return { tf: termFrequencies(terms), length: terms.length };
}

/** How often each term occurs, first seen first. */
export function termFrequencies(terms: readonly string[]): Map<string, number> {
  const tf = new Map<string, number>();
  for (const t of terms) tf.set(t, (tf.get(t) ?? 0) + 1);
  return tf;
}

/**
 * Words of a text that are names or dates, folded: those written with a capital letter where a
 * sentence does not begin ("Did Will call in May?": will, may). They never weigh less.
 */
function capitalized(text: string): Set<string> {
  const out = new Set<string>();
  let sentenceStart = true;
  for (const s of segmenter.segment(text)) {
    if (!s.isWordLike) {
      if (/[.!?¿¡。！？]/u.test(s.segment)) sentenceStart = true;
      continue;
    }
    if (!sentenceStart && /^\p{Lu}/u.test(s.segment)) out.add(fold(s.segment));
    sentenceStart = false;
  }
  return out;
}

/**
 * The distinct terms of a query with their weights, in first-seen order. In a query of a language
 * (language.ts) its stop words weigh STOP_WORD_WEIGHT (scoring.ts), except names and dates
 * (capitalized inside a sentence) and numbers; a query of stop words only ("who is she?") weighs
 * them all 1. Each word is looked up as itself and as its stem in the query's language, or, in a
 * query of no language (no stop word of any: "Straße", "Luna Milo"), as its stem in every
 * language, since the memories it should find were stemmed in theirs.
 */
export function queryTerms(query: string): QueryTerm[] {
  const words = [...new Set(tokenize(query))];
  const language = detectLanguage(words);
  const out = new Map<string, number>();
  const add = (term: string, weight: number) => out.set(term, Math.max(out.get(term) ?? 0, weight));
  if (language < 0) {
    for (const w of words) {
      add(w, 1);
      for (let l = 0; l < languages.length; l++) add(stem(w, l), 1);
    }
  } else {
    let stops = words.filter((w) => isStopWord(w, language));
    if (stops.length === words.length) stops = [];
    else if (stops.length) {
      const names = capitalized(query);
      stops = stops.filter((w) => !names.has(w));
    }
    const light = new Set(stops);
    for (const w of words) {
      const weight = light.has(w) ? STOP_WORD_WEIGHT : 1;
      add(stem(w, language), weight);
      add(w, weight);
    }
  }
  return [...out].map(([term, weight]) => ({ term, weight }));
}
