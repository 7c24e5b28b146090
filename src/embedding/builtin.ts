// The built-in embedder: the distilled table (default-embedder.bin, made by
// scripts/distill-embedder.ts) shipped inside memd. Imported as a file, so `bun build --compile`
// embeds it in the binary; read once, on first use.
import tablePath from "./default-embedder.bin" with { type: "file" };
import { parseTable, type StaticEmbedder } from "./static-embedder";

/** The model name the built-in embedder answers to (in logs and the probe's key). */
export const builtinModel = "memd-builtin-use-lite-distilled";

let loading: Promise<StaticEmbedder> | undefined;

/** The built-in embedder, read from its table the first time. */
export function builtinEmbedder(): Promise<StaticEmbedder> {
  loading ??= Bun.file(tablePath)
    .arrayBuffer()
    .then((b) => parseTable(new Uint8Array(b)));
  return loading;
}

/**
 * The text of a query whose vector the built-in embedder makes: the query less the words "user",
 * "users" and "user's". In a question to memd "the user" names whom the memories are about,
 * which the memories themselves seldom say ("I moved to Lisbon."), while the table weighs "user"
 * as a word of software: "where does the user live" ranked "Has a dog named Rex." above "I moved
 * to Lisbon." (cosines 0.121 and 0.063; without the word, 0.06 and 0.33). A query of nothing
 * else is kept whole.
 */
export function builtinQueryText(query: string): string {
  const rest = query.replace(/\busers?(?:['’]s)?\b\s*/giu, "");
  return /[\p{L}\p{N}]/u.test(rest) ? rest : query;
}
