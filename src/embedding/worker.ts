import type { Core } from "../core";
import type { Embeddings } from "../storage/storage";
import { EmbedError, embedSettings, embedTexts, newCost } from "./client";

const batchSize = 64;

/**
 * Embeds up to one batch of pending memories (stored while the endpoint was down, or queued by
 * `memd reindex`). Returns how many got a vector; throws EmbedError when the call fails.
 */
export async function embedPendingBatch(core: Core<Embeddings>): Promise<number> {
  const s = embedSettings(core.config);
  if (!s) return 0;
  const pending = await core.storage.pendingEmbeddings(batchSize);
  if (pending.length === 0) return 0;
  const vectors = await embedTexts(
    s,
    pending.map((p) => p.content),
    newCost(),
  );
  // A memory changed meanwhile keeps its newer state (setVectors checks updatedAt).
  await core.storage.setVectors(pending.map((p, i) => ({ id: p.id, updatedAt: p.updatedAt, vector: vectors[i] })));
  return pending.length;
}

export interface WorkerOptions {
  /** How often to look for pending memories when idle. */
  intervalMs?: number;
  /** Backoff after a failed call doubles from intervalMs up to this. */
  maxBackoffMs?: number;
}

/**
 * Runs embedPendingBatch until stopped: at once again while batches are full, every
 * `intervalMs` when idle, and after a failure with a backoff doubling up to `maxBackoffMs`.
 * Does nothing without an embedding model. Returns the stop function.
 */
export function startEmbedWorker(core: Core<Embeddings>, o: WorkerOptions = {}): () => Promise<void> {
  if (!embedSettings(core.config)) return async () => {};
  const interval = o.intervalMs ?? 500;
  const maxBackoff = o.maxBackoffMs ?? 30_000;
  let backoff = interval;
  let stopped = false;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let running: Promise<void> = Promise.resolve();
  const schedule = (ms: number) => {
    if (!stopped) timer = setTimeout(tick, ms);
  };
  const tick = () => {
    running = embedPendingBatch(core)
      .then((n) => {
        backoff = interval;
        schedule(n >= batchSize ? 0 : interval);
      })
      .catch((e) => {
        if (!(e instanceof EmbedError)) core.logger.error("embedding worker failed", { error: String(e) });
        backoff = Math.min(maxBackoff, backoff * 2);
        schedule(backoff);
      });
  };
  schedule(interval);
  return async () => {
    stopped = true;
    clearTimeout(timer);
    await running;
  };
}
