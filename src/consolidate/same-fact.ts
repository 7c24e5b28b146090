// Whether two memories clearly state the same fact, without a model (issue 33, consolidation):
// the same words up to case, punctuation, word order, a few stop words and inflection. Never two
// that differ in a number, a date, a negation or a name: those words are compared as written
// (numbers, number words, month and day names, negations: unstemmed; a word capitalized in
// either text, a name: unstemmed and case-folded). Precision first: a pair this does not catch is
// left apart; a false merge is the one failure that must not happen (bench/consolidation.ts).
import { detectLanguage, stem } from "../text/language";
import { fold } from "../text/tokens";

/**
 * Words that carry no fact of their own here: articles, forms of be, have and do, and a few
 * particles. Deliberately short: prepositions, pronouns, quantifiers and time words stay, since
 * "before work" and "after work" are two facts.
 */
const stopWords = new Set(
  "a an the is are was were be been being am do does did has have had having to of and very really that it its also just quite".split(
    " ",
  ),
);

/** Kept as written, never stemmed: negations, number words, and words of dates. */
const protectedWords = new Set(
  [
    "not no never none nobody nothing neither nor without nowhere cannot",
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen twenty thirty forty fifty sixty seventy eighty ninety hundred thousand million billion dozen half once twice",
    "first second third fourth fifth sixth seventh eighth ninth tenth last next",
    "january february march april may june july august september october november december jan feb mar apr jun jul aug sep sept oct nov dec",
    "monday tuesday wednesday thursday friday saturday sunday today tomorrow yesterday tonight weekend weekday",
  ]
    .join(" ")
    .split(" "),
);

/** What a memory's text is compared by. */
export interface FactKey {
  /** Language, stems and protected words, sorted: equal keys are candidates for one fact. */
  key: string;
  /** Its words unstemmed (folded), with their counts: names are checked against these. */
  words: Map<string, number>;
  /** Folded forms of the words written with a capital letter: names, compared unstemmed. */
  capitalized: Set<string>;
}

/** The words of a text as written, with contractions opened ("doesn't" is "does not"). */
function wordsOf(text: string): string[] {
  const opened = text
    .replace(/\bcan['’]t\b/gi, "can not")
    .replace(/\bwon['’]t\b/gi, "will not")
    .replace(/n['’]t\b/gi, " not")
    .replace(/\bcannot\b/gi, "can not")
    // A possessive or a contracted "is": the word stays, the "s" goes.
    .replace(/['’]s\b/gi, "");
  // A number stays whole with its parts ("2025-03-04", "10:05", "1.5", "-5"): split, the parts of
  // two different dates or times would sort into the same words.
  return opened.match(/(?<![\p{L}\p{N}])-?\p{N}+(?:[.,:/-]\p{N}+)*|[\p{L}\p{N}]+/gu) ?? [];
}

/** The comparison key of a memory's text (see FactKey). */
export function factKey(text: string): FactKey {
  const raw = wordsOf(text);
  const folded = raw.map(fold);
  const detected = detectLanguage(folded);
  // Texts too short to show their language are taken as English (memd's default).
  const language = Math.max(detected, 0);
  const parts: string[] = [];
  const words = new Map<string, number>();
  const capitalized = new Set<string>();
  raw.forEach((w, i) => {
    const f = folded[i];
    // A capital marks a name, except on the text's first word ("Prefers window seats").
    if (i > 0 && w[0] !== w[0].toLowerCase()) capitalized.add(f);
    if (stopWords.has(f)) return;
    words.set(f, (words.get(f) ?? 0) + 1);
    if (/\p{N}/u.test(f) || protectedWords.has(f)) parts.push(`=${f}`);
    else parts.push(stem(f, language));
  });
  parts.sort();
  return { key: `${language}|${parts.join(" ")}`, words, capitalized };
}

/** Whether two keys state the same fact: equal keys, and every name written the same in both. */
export function sameFact(a: FactKey, b: FactKey): boolean {
  if (a.key !== b.key) return false;
  for (const name of new Set([...a.capitalized, ...b.capitalized]))
    if ((a.words.get(name) ?? 0) !== (b.words.get(name) ?? 0)) return false;
  return true;
}

/**
 * Groups texts that state the same fact (sameFact), each group in the order of `items`; items in
 * no group of two or more are left out. Groups are cliques: every pair in a group is the same fact.
 */
export function groupSameFacts<T>(items: readonly T[], textOf: (item: T) => string): T[][] {
  const byKey = new Map<string, { facts: FactKey[]; items: T[] }[]>();
  for (const item of items) {
    const fact = factKey(textOf(item));
    const clusters = byKey.get(fact.key) ?? [];
    byKey.set(fact.key, clusters);
    const home = clusters.find((c) => c.facts.every((f) => sameFact(f, fact)));
    if (home) {
      home.facts.push(fact);
      home.items.push(item);
    } else clusters.push({ facts: [fact], items: [item] });
  }
  return [...byKey.values()].flatMap((cs) => cs.map((c) => c.items)).filter((g) => g.length > 1);
}
