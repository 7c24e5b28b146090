// Case and accent folding, shared by the tokenizer and the stop-word lists.

const marks = /\p{M}+/gu;
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
