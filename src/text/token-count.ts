// Counting tokens as OpenAI's models do: cl100k_base (GPT-4, GPT-3.5, text-embedding-3) by
// js-tiktoken, the pure-JS port of OpenAI's tiktoken. Its table (1 MB) is bundled; the encoder is
// built on the first count (about 0.2 s), not at startup.
import { Tiktoken } from "js-tiktoken/lite";
import cl100k from "js-tiktoken/ranks/cl100k_base";

export const tokenizerName = "cl100k_base" as const;

let encoder: Tiktoken | undefined;

/** The number of cl100k_base tokens of `text`. */
export function countTokens(text: string): number {
  if (text === "") return 0;
  encoder ??= new Tiktoken(cl100k);
  return encoder.encode(text).length;
}
