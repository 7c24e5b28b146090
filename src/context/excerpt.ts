// The excerpt of a memory too long for what is left of a context block: the part that holds the
// query's words, not the whole memory left out. Sentences are scored by the query terms they hold
// (by weight, each term once); the best one is taken, then its neighbours, nearest first, while
// they fit; a sentence longer than the room is cut to the words around its first match. Without a
// query, the memory's beginning. Left-out parts are marked "…".

import type { QueryTerm } from "../text/scoring";
import { countTokens } from "../text/token-count";
import { indexTerms } from "../text/tokens";

const sentenceSegmenter = new Intl.Segmenter(undefined, { granularity: "sentence" });

/** The content on one line. */
export const oneLine = (s: string) => s.replace(/\s*[\r\n]+\s*/g, " ").trim();

/**
 * The most relevant part of `content` (one line) whose text, after `prefix`, takes at most
 * `budget` tokens; undefined when not even a few words fit.
 */
export function excerpt(
  content: string,
  terms: readonly QueryTerm[],
  prefix: string,
  budget: number,
): string | undefined {
  const fits = (text: string) => countTokens(prefix + text) <= budget;
  const sentences = [...sentenceSegmenter.segment(oneLine(content))].map((s) => s.segment.trim()).filter(Boolean);
  if (sentences.length === 0) return undefined;
  const weight = new Map(terms.map((t) => [t.term, t.weight]));
  const scoreOf = (s: string) => {
    let sum = 0;
    for (const t of new Set(indexTerms(s))) sum += weight.get(t) ?? 0;
    return sum;
  };
  let best = 0;
  let bestScore = -1;
  sentences.forEach((s, i) => {
    const v = scoreOf(s);
    if (v > bestScore) {
      best = i;
      bestScore = v;
    }
  });
  const render = (from: number, to: number) =>
    `${from > 0 ? "… " : ""}${sentences.slice(from, to + 1).join(" ")}${to < sentences.length - 1 ? " …" : ""}`;
  if (!fits(render(best, best))) return cutSentence(sentences, best, weight, fits);
  let from = best;
  let to = best;
  // Neighbours, the next one first (what follows a match most often explains it).
  for (let grew = true; grew; ) {
    grew = false;
    if (to + 1 < sentences.length && fits(render(from, to + 1))) {
      to++;
      grew = true;
    }
    if (from > 0 && fits(render(from - 1, to))) {
      from--;
      grew = true;
    }
  }
  return render(from, to);
}

/** Sentence i cut to the most words around its first query term that fit (at least a few). */
function cutSentence(
  sentences: string[],
  i: number,
  weight: Map<string, number>,
  fits: (text: string) => boolean,
): string | undefined {
  const words = sentences[i].split(/\s+/);
  let at = words.findIndex((w) => indexTerms(w).some((t) => weight.has(t)));
  if (at < 0) at = 0;
  const render = (from: number, to: number) =>
    `${from > 0 || i > 0 ? "… " : ""}${words.slice(from, to + 1).join(" ")}${to < words.length - 1 || i < sentences.length - 1 ? " …" : ""}`;
  if (!fits(render(at, at))) return undefined;
  // Grow by halves: few token counts even for a sentence of thousands of words.
  let from = at;
  let to = at;
  for (let step = 64; step >= 1; ) {
    const nextTo = Math.min(words.length - 1, to + step);
    const nextFrom = Math.max(0, from - (step >> 2));
    if ((nextTo !== to || nextFrom !== from) && fits(render(nextFrom, nextTo))) {
      to = nextTo;
      from = nextFrom;
    } else step >>= 1;
  }
  return render(from, to);
}
