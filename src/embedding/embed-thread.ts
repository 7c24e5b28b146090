// The built-in embedder's thread (a Worker): embeds the texts it is sent with the table
// (builtin.ts) and answers their vectors, so that embedding stored memories takes no time of the
// thread that serves requests. thread.ts starts it; scripts/build.ts builds it into the binary.
import { builtinEmbedder } from "./builtin";

declare const self: Worker;

export interface EmbedRequest {
  id: number;
  texts: string[];
}

export interface EmbedAnswer {
  id: number;
  /** One Float32Array's buffer per text (transferred), or the error's message. */
  vectors?: ArrayBuffer[];
  error?: string;
}

self.onmessage = async (event: MessageEvent<EmbedRequest>) => {
  const { id, texts } = event.data;
  try {
    const e = await builtinEmbedder();
    const vectors = texts.map((t) => e.embed(t).buffer as ArrayBuffer);
    self.postMessage({ id, vectors } satisfies EmbedAnswer, vectors);
  } catch (error) {
    self.postMessage({ id, error: String(error) } satisfies EmbedAnswer);
  }
};
