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
