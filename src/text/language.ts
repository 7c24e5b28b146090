// Languages for the keyword index: stop words from stopwords-iso (per ISO 639-1 code) and the
// Snowball stemmers (snowball-stemmers, the JS port of snowball.tartarus.org) for the languages
// that have both. A text's language is the one with the most stop words among its words (ties:
// the order of `languages`), if that is evidence enough (see minStopWords); a text without it is
// of no language, and its words are not stemmed.

import * as snowball from "snowball-stemmers";
import stopwordsIso from "stopwords-iso";
import { fold } from "./fold";

/** Languages with a stop-word list and a Snowball stemmer: [ISO 639-1 code, Snowball name]. */
export const languages = [
  ["en", "english"],
  ["de", "german"],
  ["fr", "french"],
  ["es", "spanish"],
  ["it", "italian"],
  ["pt", "portuguese"],
  ["nl", "dutch"],
  ["sv", "swedish"],
  ["no", "norwegian"],
  ["da", "danish"],
  ["fi", "finnish"],
  ["ru", "russian"],
  ["hu", "hungarian"],
  ["ro", "romanian"],
  ["tr", "turkish"],
  ["ca", "catalan"],
  ["cs", "czech"],
  ["eu", "basque"],
  ["ga", "irish"],
  ["hy", "armenian"],
  ["ar", "arabic"],
  ["sl", "slovene"],
] as const;
export type Language = (typeof languages)[number][0];

const lists = stopwordsIso as Record<string, string[]>;

/**
 * Names of months and days in each language (from Intl): dates are never stop words, so "May"
 * and "mars" stay in a query.
 */
function dateWords(code: string): Set<string> {
  const out = new Set<string>();
  const add = (s: string) => {
    for (const w of fold(s).split(/[^\p{L}]+/u)) if (w) out.add(w);
  };
  for (const month of ["long", "short"] as const) {
    const f = new Intl.DateTimeFormat(code, { month, timeZone: "UTC" });
    for (let m = 0; m < 12; m++) add(f.format(Date.UTC(2024, m, 15)));
  }
  const d = new Intl.DateTimeFormat(code, { weekday: "long", timeZone: "UTC" });
  for (let i = 0; i < 7; i++) add(d.format(Date.UTC(2024, 0, 1 + i)));
  return out;
}

/** Folded word -> bit set of the languages (index in `languages`) whose stop word it is. */
const stopBits = new Map<string, number>();
languages.forEach(([code], i) => {
  const dates = dateWords(code);
  for (const raw of lists[code] ?? []) {
    const w = fold(raw);
    // Only single words, without digits: numbers are never stop words.
    if (!/^[\p{L}]+$/u.test(w) || dates.has(w)) continue;
    stopBits.set(w, (stopBits.get(w) ?? 0) | (1 << i));
  }
});

/** Whether `word` (folded) is a stop word of `language` (its index in `languages`). */
export const isStopWord = (word: string, language: number): boolean =>
  ((stopBits.get(word) ?? 0) & (1 << language)) !== 0;

type Stemmer = { stem(word: string): string };
const stemmers: Stemmer[] = languages.map(([, name]) => snowball.newStemmer(name));

/** Words the stemmers leave alone: with a digit or other sign, or in a CJK script. */
const stemmable = /^\p{L}+(?:['’]\p{L}+)*$/u;
const cjk = /[\p{Script=Han}\p{Script=Hiragana}\p{Script=Katakana}\p{Script=Hangul}]/u;

/** What is known of a folded word: its stop-word languages, and its stems made so far. */
interface Word {
  stopBits: number;
  canStem: boolean;
  stems: (string | undefined)[];
}
/** Words seen, so that each is looked up and stemmed once per process (until the cache fills). */
const words = new Map<string, Word>();
const MAX_CACHED_WORDS = 200_000;

function word(w: string): Word {
  let info = words.get(w);
  if (info === undefined) {
    if (words.size >= MAX_CACHED_WORDS) words.clear();
    info = { stopBits: stopBits.get(w) ?? 0, canStem: stemmable.test(w) && !cjk.test(w), stems: [] };
    words.set(w, info);
  }
  return info;
}

/** The Snowball stem of a folded word in a language (its index in `languages`). */
export function stem(w: string, language: number): string {
  return stemOf(w, word(w), language);
}

function stemOf(w: string, info: Word, language: number): string {
  if (!info.canStem) return w;
  let s = info.stems[language];
  if (s === undefined) s = info.stems[language] = fold(stemmers[language].stem(w)) || w;
  return s;
}

const counts = new Int32Array(languages.length);

/**
 * Stop words a text needs of a language (occurrences) for that to be its language. One word is
 * no evidence in a short text: "Collects stamps, album bravo." has one stop word, French
 * "bravo", and stemmed as French it ranked about twice its neighbours for "stamps", which stayed
 * unstemmed. So a language other than English needs two; English, the default of memd's texts
 * (and first in `languages`, so it wins ties), needs one: "Moved to Berlin" stays English.
 */
const minStopWords = (language: number) => (language === 0 ? 1 : 2);

/**
 * The language of a text's words (folded): the index in `languages` of the one with the most
 * stop words among them (ties: the first), or -1 when none has enough (minStopWords).
 */
export function detectLanguage(ws: readonly string[]): number {
  return detect(ws.map(word));
}

function detect(infos: readonly Word[]): number {
  let any = 0;
  let stops = 0;
  for (const info of infos) {
    any |= info.stopBits;
    if (info.stopBits !== 0) stops++;
  }
  if (any === 0) return -1;
  // One language: no counting.
  if ((any & (any - 1)) === 0) {
    const only = 31 - Math.clz32(any);
    return stops >= minStopWords(only) ? only : -1;
  }
  counts.fill(0);
  for (const info of infos) {
    let bits = info.stopBits;
    for (let i = 0; bits !== 0; i++, bits >>>= 1) if (bits & 1) counts[i]++;
  }
  let best = 0;
  for (let i = 1; i < counts.length; i++) if (counts[i] > counts[best]) best = i;
  return counts[best] >= minStopWords(best) ? best : -1;
}

/** A text's words (folded) stemmed in the text's language, in place; returns the language (-1: none). */
export function stemText(ws: string[]): number {
  const infos = ws.map(word);
  const language = detect(infos);
  if (language >= 0) for (let i = 0; i < ws.length; i++) ws[i] = stemOf(ws[i], infos[i], language);
  return language;
}
