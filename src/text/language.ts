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
  /** The word itself: one string for every text that has it (its hash is made once, for the lists' maps). */
  text: string;
  /** Its number in this process (see nextId). */
  id: number;
  stopBits: number;
  canStem: boolean;
  stems: (string | undefined)[];
  /** The numbers of its stems (see nextId), by language: made when first asked for (stemIdOf). */
  stemIds: (number | undefined)[] | undefined;
}
/**
 * Words seen, so that each is looked up and stemmed once per process (until the cache fills): an
 * open-addressing table by a hash of the word's characters, so that a plain ASCII text's words
 * are found without making a string of each (stemAscii; a string per word and a Map lookup took
 * most of the CPU of tokenizing a memory).
 */
let slots = new Int32Array(1024);
const entries: Word[] = [];
const hashes: number[] = [];
/** Up to how many words the cache holds before it is emptied (tests make it small). */
export const wordCache = { max: 200_000 };
/**
 * The next word's number: every word entered in the cache gets one, never given to another text
 * (a word met again after the cache was emptied gets a new one), so a number names one text for
 * the process's life and the keyword lists can find a term's list by it (stemAscii's `ids`).
 */
let nextId = 1;

/** FNV-1a of text[from, to), ASCII capitals lowered when `lower`. */
function hashOf(text: string, from: number, to: number, lower: boolean): number {
  let h = 0x811c9dc5;
  for (let i = from; i < to; i++) {
    let c = text.charCodeAt(i);
    if (lower && c >= 65 && c <= 90) c += 32;
    h = Math.imul(h ^ c, 16777619);
  }
  return h;
}

/** Whether `w` is text[from, to) (ASCII capitals lowered when `lower`). */
function same(w: string, text: string, from: number, to: number, lower: boolean): boolean {
  if (w.length !== to - from) return false;
  for (let i = from; i < to; i++) {
    let c = text.charCodeAt(i);
    if (lower && c >= 65 && c <= 90) c += 32;
    if (w.charCodeAt(i - from) !== c) return false;
  }
  return true;
}

/** The cached word text[from, to) (lowered: see hashOf), added if new. */
function lookup(text: string, from: number, to: number, lower: boolean): Word {
  const h = hashOf(text, from, to, lower);
  let mask = slots.length - 1;
  let s = h & mask;
  for (let e = slots[s]; e !== 0; s = (s + 1) & mask, e = slots[s])
    if (hashes[e - 1] === h && same(entries[e - 1].text, text, from, to, lower)) return entries[e - 1];
  if (entries.length >= wordCache.max) {
    entries.length = 0;
    hashes.length = 0;
    slots = new Int32Array(1024);
    mask = slots.length - 1;
    s = h & mask;
  } else if ((entries.length + 1) * 2 > slots.length) {
    slots = new Int32Array(slots.length * 2);
    mask = slots.length - 1;
    for (let e = 0; e < entries.length; e++) {
      let t = hashes[e] & mask;
      while (slots[t] !== 0) t = (t + 1) & mask;
      slots[t] = e + 1;
    }
    s = h & mask;
    while (slots[s] !== 0) s = (s + 1) & mask;
  }
  let w = text.slice(from, to);
  if (lower) w = w.toLowerCase();
  const info: Word = {
    text: w,
    id: nextId++,
    stopBits: stopBits.get(w) ?? 0,
    canStem: stemmable.test(w) && !cjk.test(w),
    stems: [],
    stemIds: undefined,
  };
  entries.push(info);
  hashes.push(h);
  slots[s] = entries.length;
  return info;
}

const word = (w: string): Word => lookup(w, 0, w.length, false);

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
  for (let i = 0; i < ws.length; i++) ws[i] = language >= 0 ? stemOf(ws[i], infos[i], language) : infos[i].text;
  return language;
}

/** The number of a word's stem in a language (see nextId). */
function stemIdOf(info: Word, language: number): number {
  if (!info.canStem) return info.id;
  info.stemIds ??= [];
  const ids = info.stemIds;
  let id = ids[language];
  if (id === undefined) {
    const s = stemOf(info.text, info, language);
    id = ids[language] = s === info.text ? info.id : word(s).id;
  }
  return id;
}

/**
 * stemText of the words of a plain ASCII text that are runs of letters and digits, lowered and
 * cut to `max` characters (text/tokens.ts's tokenize, whose fast case this is); the same terms.
 * With `ids`, each term's number (see nextId) is put there too, in the same order.
 */
export function stemAscii(text: string, max: number, ids?: number[]): string[] {
  const infos: Word[] = [];
  for (let i = 0; i < text.length; ) {
    const c = text.charCodeAt(i);
    if (!isAlnum(c)) {
      i++;
      continue;
    }
    let j = i + 1;
    while (j < text.length && isAlnum(text.charCodeAt(j))) j++;
    infos.push(lookup(text, i, Math.min(j, i + max), true));
    i = j;
  }
  const language = detect(infos);
  const out = new Array<string>(infos.length);
  for (let i = 0; i < infos.length; i++)
    out[i] = language >= 0 ? stemOf(infos[i].text, infos[i], language) : infos[i].text;
  if (ids) for (let i = 0; i < infos.length; i++) ids[i] = language >= 0 ? stemIdOf(infos[i], language) : infos[i].id;
  return out;
}

const isAlnum = (c: number) => (c >= 48 && c <= 57) || (c >= 65 && c <= 90) || (c >= 97 && c <= 122);
