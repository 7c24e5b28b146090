// The person a question names, linked to the memories that person said. Agents often store a
// conversation turn by turn as "Name: text" (a transcript's line), and a question about someone
// ("What books has Tim read?") is answered by that person's own turns, where they say "I" and the
// name appears only as the speaker's label: the label is the link the words of the turn lack.

import type { Scored } from "../storage/storage";

/**
 * How much a named speaker's memory counts over the others' in the context block's order: double.
 * On LoCoMo's dev half (a conversation of two speakers per entity; 1.5, 2 and 3 measured within
 * 0.02 of each other; bench/notes.md, issue 36) it brought more of a multi-hop question's evidence
 * into the block, and more of every question's.
 */
export const NAMED_SPEAKER_FACTOR = 2;

/** The longest label, in characters. */
const MAX_LABEL = 40;

/**
 * A speaker's label: one to three words, the first capitalised (or of a script without case), then
 * a colon (the space after it is checked by speakerOf).
 */
const label = /^\s*([\p{Lu}\p{Lo}][\p{L}\p{M}\p{N}'’.-]*(?: [\p{L}\p{M}\p{N}'’.-]+){0,2}):$/u;

/** The speaker of a memory written "Name: text", lower-cased; undefined when it has no label. */
export function speakerOf(content: string): string | undefined {
  const end = content.slice(0, MAX_LABEL + 8).indexOf(": ");
  if (end <= 0) return undefined;
  const m = label.exec(content.slice(0, end + 1));
  return m && m[1].length <= MAX_LABEL ? m[1].toLowerCase() : undefined;
}

const escapeRegExp = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

/**
 * Whether `query` holds `name` as whole words (case-insensitive; "Tim's" names Tim); a name in a
 * script without case (Chinese, Japanese...) anywhere in it, as such scripts run words together.
 */
function names(query: string, name: string): boolean {
  if (/^\p{Lo}/u.test(name)) return query.includes(name);
  return new RegExp(`(?<![\\p{L}\\p{M}\\p{N}])${escapeRegExp(name)}(?![\\p{L}\\p{M}\\p{N}])`, "iu").test(query);
}

/**
 * The hits (BM25 scores, best first) with the first `keep` in their places and, after them, the
 * memories of the speakers the query names scored NAMED_SPEAKER_FACTOR times, best first. Only
 * when the query names some of the hits' speakers and not all of them: a question naming both
 * sides of a conversation, or memories without labels, leave the hits as they were. The first
 * few stay: their neighbours in time come with them (service.ts withAdjacent), and the reply next
 * to the other speaker's question is often the answer.
 */
export function favourNamedSpeakers(hits: readonly Scored[], query: string, keep: number): Scored[] {
  const of = hits.map((h) => speakerOf(h.memory.content));
  const speakers = new Map<string, boolean>();
  for (const s of of) if (s !== undefined && !speakers.has(s)) speakers.set(s, names(query, s));
  const named = [...speakers.values()].filter(Boolean).length;
  if (named === 0 || named === speakers.size) return [...hits];
  const rest = hits
    .map((h, i) => {
      const s = of[i];
      return { h: s !== undefined && speakers.get(s) ? { ...h, score: h.score * NAMED_SPEAKER_FACTOR } : h, i };
    })
    .slice(keep)
    .sort((a, b) => b.h.score - a.h.score || a.i - b.i)
    .map((x) => x.h);
  return [...hits.slice(0, keep), ...rest];
}
