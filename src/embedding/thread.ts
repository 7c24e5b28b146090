// The built-in embedder off the request thread: stored memories are embedded by a Worker
// (embed-thread.ts), one batch at a time, while this thread only reads the pending queue and
// writes the vectors back. A query's own vector is still made here (one short text, part of
// its search).
import type { EmbedAnswer, EmbedRequest } from "./embed-thread";

export interface EmbedThread {
  /** The vectors of `texts`, made on the thread. */
  embed(texts: string[]): Promise<Float32Array[]>;
  /** Ends the thread; calls waiting on it are refused. */
  stop(): void;
}

/**
 * The thread's entry point: beside this file when run from source; in the compiled binary, where
 * every module shares the binary's own URL, at its path under src/ (scripts/build.ts builds it
 * as an entry point of its own).
 */
const entry = import.meta.url.startsWith("file:///$bunfs/")
  ? "/$bunfs/root/embedding/embed-thread.ts"
  : new URL("./embed-thread.ts", import.meta.url).href;

/** Longest wait for one batch's answer before it is refused (the thread is stuck or gone). */
const answerTimeoutMs = 60_000;

/** The thread, started on its first batch (a server that stores nothing never starts one). */
export function startEmbedThread(): EmbedThread {
  let worker: Worker | undefined;
  const waiting = new Map<number, { resolve: (v: Float32Array[]) => void; reject: (e: Error) => void }>();
  let next = 0;
  let stopped = false;
  const failAll = (message: string) => {
    for (const w of waiting.values()) w.reject(new Error(message));
    waiting.clear();
  };
  const started = (): Worker => {
    if (worker) return worker;
    const w = new Worker(entry);
    // The thread does not keep the process alive: a server stops it when it stops.
    w.unref();
    w.onmessage = (event: MessageEvent<EmbedAnswer>) => {
      const { id, vectors, error } = event.data;
      const call = waiting.get(id);
      if (!call) return;
      waiting.delete(id);
      if (vectors) call.resolve(vectors.map((b) => new Float32Array(b)));
      else call.reject(new Error(`the embedding thread failed: ${error}`));
    };
    w.onerror = (event) => failAll(`the embedding thread failed: ${event.message}`);
    worker = w;
    return w;
  };
  return {
    embed(texts) {
      if (stopped) return Promise.reject(new Error("the embedding thread is stopped"));
      if (texts.length === 0) return Promise.resolve([]);
      const id = next++;
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => {
          waiting.delete(id);
          reject(new Error("the embedding thread did not answer in time"));
        }, answerTimeoutMs);
        const done = () => clearTimeout(timer);
        waiting.set(id, {
          resolve: (v) => {
            done();
            resolve(v);
          },
          reject: (e) => {
            done();
            reject(e);
          },
        });
        started().postMessage({ id, texts } satisfies EmbedRequest);
      });
    },
    stop() {
      stopped = true;
      failAll("the embedding thread is stopped");
      worker?.terminate();
    },
  };
}
