// The built-in embedder off the request thread: stored memories are embedded by a Worker
// (embed-thread.ts), one batch at a time. On LMDB the Worker also reads the pending queue and
// writes the vectors, and this thread only has its in-memory vectors follow the keys written;
// on PostgreSQL this thread reads the queue and writes the vectors back. A query's own vector
// is still made here (one short text, part of its search).
import type { VectorKey } from "../storage/storage";
import type { EmbedAnswer, EmbedRequest } from "./embed-thread";

export interface EmbedThread {
  /** The vectors of `texts`, made on the thread. */
  embed(texts: string[]): Promise<Float32Array[]>;
  /**
   * LMDB: up to `limit` pending memories of the store in `dataDir` embedded and their vectors
   * stored by the thread itself; how many were read and the vector keys written.
   */
  store(o: { dataDir: string; mapSizeMb?: number; limit: number }): Promise<{ read: number; touched: VectorKey[] }>;
  /** Starts the thread and has it read its table, so that its first batch need not wait for them. */
  warm(): void;
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
  // Each call waiting for its answer.
  const waiting = new Map<number, { resolve: (a: EmbedAnswer) => void; reject: (e: Error) => void }>();
  let next = 0;
  let stopped = false;
  /** The thread has answered once, so its modules (lmdb's native addon among them) are loaded. */
  let loaded = false;
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
      loaded = true;
      if (stopped) return void w.terminate();
      const answer = event.data;
      const call = waiting.get(answer.id);
      if (!call) return;
      waiting.delete(answer.id);
      if (answer.error === undefined) call.resolve(answer);
      else call.reject(new Error(`the embedding thread failed: ${answer.error}`));
    };
    w.onerror = (event) => failAll(`the embedding thread failed: ${event.message}`);
    worker = w;
    return w;
  };
  /** Sends one request and waits for its answer (at most answerTimeoutMs). */
  const ask = (request: EmbedRequest): Promise<EmbedAnswer> => {
    if (stopped) return Promise.reject(new Error("the embedding thread is stopped"));
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        waiting.delete(request.id);
        reject(new Error("the embedding thread did not answer in time"));
      }, answerTimeoutMs);
      waiting.set(request.id, {
        resolve: (a) => {
          clearTimeout(timer);
          resolve(a);
        },
        reject: (e) => {
          clearTimeout(timer);
          reject(e);
        },
      });
      started().postMessage(request);
    });
  };
  return {
    async embed(texts) {
      if (texts.length === 0 && !stopped) return [];
      const { vectors } = await ask({ id: next++, texts });
      return (vectors ?? []).map((b) => new Float32Array(b));
    },
    warm() {
      if (!stopped && !worker) ask({ id: next++, texts: [] }).catch(() => {});
    },
    async store(store) {
      const { stored } = await ask({ id: next++, store });
      return stored ?? { read: 0, touched: [] };
    },
    stop() {
      stopped = true;
      failAll("the embedding thread is stopped");
      // A Worker terminated while it loads lmdb's native addon brings the whole process down
      // (Bun 1.4.5: "NAPI FATAL ERROR ... Crashed while loading native module", once in make test,
      // a server stopped right after its start had warmed the thread): ended once it has answered
      // (onmessage), or after 10 s.
      const w = worker;
      if (!w || loaded) w?.terminate();
      else setTimeout(() => w.terminate(), 10_000).unref();
    },
  };
}
