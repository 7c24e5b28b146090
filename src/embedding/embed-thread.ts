// The built-in embedder's thread (a Worker): embeds the texts it is sent with the table
// (builtin.ts) and answers their vectors, so that embedding stored memories takes no time of the
// thread that serves requests. On LMDB it also reads the pending memories and writes their
// vectors itself, on its own handle of the same environment (lmdb-js shares one environment
// between a process's threads), and answers only the keys it wrote. thread.ts starts it;
// scripts/build.ts builds it into the binary.
// First: in the compiled binary, lmdb's native addon is loaded through it (as in main.ts).
import "../native-addon";
import type { VectorKey } from "../storage/storage";
import { embedPendingElsewhere } from "../storage/vectors-elsewhere";
import { builtinEmbedder } from "./builtin";

declare const self: Worker;

export type EmbedRequest =
  | { id: number; texts: string[] }
  | { id: number; store: { dataDir: string; mapSizeMb?: number; limit: number } };

export interface EmbedAnswer {
  id: number;
  /** One Float32Array's buffer per text (transferred). */
  vectors?: ArrayBuffer[];
  /** A store batch: how many pending memories were read, and the vector keys written. */
  stored?: { read: number; touched: VectorKey[] };
  /** The error's message. */
  error?: string;
}

self.onmessage = async (event: MessageEvent<EmbedRequest>) => {
  const request = event.data;
  const { id } = request;
  try {
    const e = await builtinEmbedder();
    if ("texts" in request) {
      const vectors = request.texts.map((t) => e.embed(t).buffer as ArrayBuffer);
      self.postMessage({ id, vectors } satisfies EmbedAnswer, vectors);
      return;
    }
    const { limit, ...at } = request.store;
    const stored = await embedPendingElsewhere(at, (texts) => texts.map((t) => e.embed(t)), limit);
    self.postMessage({ id, stored } satisfies EmbedAnswer);
  } catch (error) {
    self.postMessage({ id, error: String(error) } satisfies EmbedAnswer);
  }
};
