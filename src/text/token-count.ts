// Counting tokens as OpenAI's models do: cl100k_base (GPT-4, GPT-3.5, text-embedding-3) by
// js-tiktoken, the pure-JS port of OpenAI's tiktoken. Its table (1 MB) is bundled; the encoder is
// built on the first count (about 0.2 s), not at startup.
//
// tiktoken cuts a text into pieces by its pattern and encodes each piece on its own, so a text's
// count is the sum of its pieces' counts: pieces are counted once and remembered (most are
// common words), which makes counting a prompt-sized text about 10× faster than encoding it.
// Special-token strings such as "<|endoftext|>" are counted as the plain text they are.
import { Tiktoken } from "js-tiktoken/lite";
import cl100k from "js-tiktoken/ranks/cl100k_base";

export const tokenizerName = "cl100k_base" as const;

let encoder: Tiktoken | undefined;
const pattern = new RegExp(cl100k.pat_str, "gu");
const pieces = new Map<string, number>();
const MAX_CACHED_PIECES = 100_000;

/** The number of cl100k_base tokens of `text`. */
export function countTokens(text: string): number {
  let n = 0;
  for (const [piece] of text.matchAll(pattern)) {
    let c = pieces.get(piece);
    if (c === undefined) {
      encoder ??= new Tiktoken(cl100k);
      c = encoder.encode(piece, [], []).length;
      if (pieces.size >= MAX_CACHED_PIECES) pieces.clear();
      pieces.set(piece, c);
    }
    n += c;
  }
  return n;
}
