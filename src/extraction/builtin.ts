// The extractor used when no model is configured, and the lexical similarity
// that picks which existing memories to show the model. No model, no I/O.
import { statementsOf, withoutSmallTalk } from "./conversation";

/**
 * Near-duplicate threshold for `similarity` (Jaccard over word-token sets).
 * Word tokens rather than character trigrams: "my PIN is 1234" and "my PIN is
 * 1235" share almost every trigram but are different facts, and dropping a
 * real fact is worse than keeping a near-duplicate. At 0.85, order, case,
 * punctuation and repeated words never matter; one extra word is tolerated
 * once 6 words are shared (6/7); one changed word only in sentences of 13
 * words or more (12/14), where it rarely changes the fact.
 */
export const NEAR_DUPLICATE = 0.85;

/** Case-folds, collapses white space and strips trailing punctuation: the form exact duplicates are compared in. */
export function normalizeFact(text: string): string {
  return text
    .normalize("NFKC")
    .toLowerCase()
    .replace(/\s+/g, " ")
    .trim()
    .replace(/[\s.!?;:,…]+$/u, "");
}

const segmenter = new Intl.Segmenter("en", { granularity: "sentence" });

/**
 * Splits content into sentence-level facts: trimmed, list markers removed,
 * fragments without a letter dropped. A one-word segment is joined to the next
 * one, because the segmenter breaks after abbreviations such as "Dr.". `clean`
 * rewrites each sentence first (the built-in extractor drops small talk there).
 */
export function splitFacts(content: string, clean: (sentence: string) => string = (s) => s): string[] {
  const facts: string[] = [];
  let pending = "";
  // The segmenter ends a sentence after "Dr." before a capital: join such a piece to the next.
  const joined: string[] = [];
  let carry = "";
  for (const { segment } of segmenter.segment(content)) {
    const text = carry + segment;
    carry = "";
    if (endsInAbbreviation(text)) carry = text;
    else joined.push(text);
  }
  if (carry) joined.push(carry);
  const segments = joined.flatMap(splitLowercase);
  for (const segment of segments) {
    const text = (pending + clean(segment.trim().replace(/^(?:[-*•]|\d+[.)])\s+/u, ""))).trim();
    pending = "";
    if (!/\p{L}/u.test(text)) continue;
    if (!/\s/.test(text)) pending = `${text} `;
    else facts.push(text);
  }
  if (pending) facts.push(pending.trim());
  return facts;
}

// Words that end in a period without ending the sentence ("Dr. smith", "e.g. tea").
const ABBREVIATIONS = new Set(
  "dr mr mrs ms prof st jr sr vs etc e.g i.e no nr approx dept inc ltd co mt ft fig cf al ca".split(" "),
);

const isAbbreviation = (word: string) =>
  ABBREVIATIONS.has(word.toLowerCase().replace(/^\p{P}+/u, "")) || /^\p{L}$/u.test(word);

/** Whether `text` ends in an abbreviation's period ("I saw Dr. "), which ends no sentence. */
function endsInAbbreviation(text: string): boolean {
  // The tail only: on a long run without spaces the pattern would backtrack from every position.
  const m = /(\S+)\.\s*$/.exec(text.slice(-64));
  return m !== null && isAbbreviation(m[1]);
}

/**
 * Splits a segment further where a sentence ends before a lowercase letter ("i like cats. i hate
 * dogs."), which the segmenter leaves whole because it expects a capital. A period after an
 * abbreviation or a single letter (an initial) is not an end; "3.5 km" has no space after its
 * period and is never split.
 */
function splitLowercase(segment: string): string[] {
  const out: string[] = [];
  let start = 0;
  for (const m of segment.matchAll(/[.!?]+\s+(?=\p{Ll})/gu)) {
    const word = /(\S+)$/.exec(segment.slice(start, m.index))?.[1] ?? "";
    if (m[0][0] === "." && isAbbreviation(word)) continue;
    const end = m.index + m[0].trimEnd().length;
    out.push(segment.slice(start, end));
    start = m.index + m[0].length;
  }
  out.push(segment.slice(start));
  return out;
}

function wordSet(text: string): Set<string> {
  return new Set(normalizeFact(text).match(/[\p{L}\p{N}]+/gu) ?? []);
}

function jaccard(a: Set<string>, b: Set<string>): number {
  if (a.size === 0 && b.size === 0) return 1;
  let shared = 0;
  for (const w of a) if (b.has(w)) shared++;
  return shared / (a.size + b.size - shared);
}

/** Jaccard similarity of the two texts' word-token sets, 0..1. */
export function similarity(a: string, b: string): number {
  return jaccard(wordSet(a), wordSet(b));
}

export type BuiltinResult<T> = {
  /** Facts to add, in content order. */
  facts: string[];
  /** Facts not added; `duplicateOf` is the existing memory matched, or undefined when an earlier fact of the same content was. */
  skipped: { fact: string; duplicateOf: T | undefined }[];
};

/**
 * The facts the built-in extractor reads in content: the user's statements (conversation.ts), a
 * sentence each, without greetings and acknowledgements.
 */
export const builtinFacts = (content: string): string[] => splitFacts(statementsOf(content), withoutSmallTalk);

/**
 * Splits content into facts (builtinFacts) and skips those that duplicate an existing
 * memory or an earlier fact: same normalized text, or `similarity` at or
 * above NEAR_DUPLICATE. Cost is facts × existing; the caller bounds `existing`.
 */
export function extractBuiltin<T extends { content: string }>(
  content: string,
  existing: readonly T[],
): BuiltinResult<T> {
  const known = existing.map((m) => ({ memory: m, norm: normalizeFact(m.content), words: wordSet(m.content) }));
  const added: { norm: string; words: Set<string> }[] = [];
  const result: BuiltinResult<T> = { facts: [], skipped: [] };
  const same = (norm: string, words: Set<string>) => (k: { norm: string; words: Set<string> }) =>
    k.norm === norm || jaccard(k.words, words) >= NEAR_DUPLICATE;
  for (const fact of builtinFacts(content)) {
    const norm = normalizeFact(fact);
    const words = wordSet(fact);
    const old = known.find(same(norm, words));
    if (old) result.skipped.push({ fact, duplicateOf: old.memory });
    else if (added.some(same(norm, words))) result.skipped.push({ fact, duplicateOf: undefined });
    else {
      added.push({ norm, words });
      result.facts.push(fact);
    }
  }
  return result;
}

// Words that would make every memory look related to every content.
const STOPWORDS = new Set(
  "a an the and or but of to in on at for with from by as is are was were be been am i me my mine you your he she it its we our they their them this that these those do does did has have had not no so if then than there here user users".split(
    " ",
  ),
);

// Crude plural/verb -s folding so "likes" meets "like"; used for candidate recall only, never for duplicate decisions.
const stem = (w: string) => (w.length > 3 && w.endsWith("s") && !w.endsWith("ss") ? w.slice(0, -1) : w);

function keywords(text: string): Set<string> {
  const out = new Set<string>();
  for (const w of wordSet(text)) if (!STOPWORDS.has(w)) out.add(stem(w));
  return out;
}

/**
 * The existing memories the new content may touch, most related first, at
 * most `max`. Score: the share of a memory's keywords that occur in the
 * content (containment, not Jaccard, because the content is usually much
 * longer than one memory). Memories sharing no keyword are left out.
 */
export function selectCandidates<T extends { content: string }>(
  content: string,
  memories: readonly T[],
  max = 20,
): T[] {
  const wanted = keywords(content);
  const scored: { memory: T; score: number; shared: number; index: number }[] = [];
  memories.forEach((memory, index) => {
    const words = keywords(memory.content);
    let shared = 0;
    for (const w of words) if (wanted.has(w)) shared++;
    if (shared > 0) scored.push({ memory, score: shared / words.size, shared, index });
  });
  scored.sort((a, b) => b.score - a.score || b.shared - a.shared || a.index - b.index);
  return scored.slice(0, Math.max(0, max)).map((s) => s.memory);
}
