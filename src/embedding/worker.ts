import type { Core } from "../core";
import type { Embeddings, VectorKey } from "../storage/storage";
import { EmbedError, embedSettings, embedTexts, newCost } from "./client";
import { type EmbedThread, startEmbedThread } from "./thread";

const batchSize = 64;
/**
 * Pending memories the built-in embedder's thread embeds and writes in one transaction on LMDB:
 * four batches, as each transaction's durable commit and hand-offs (the serving thread's refresh
 * of its vectors) weigh on every memory it holds. Raw stores at 64 connections, per-thread CPU
 * of the process in the same run: the thread 30 against 37-45 µs a store, the serving thread
 * 66 against 73-105 (bench/notes.md, "h32e, stop 43").
 */
const threadBatchSize = 4 * batchSize;

/** Each server's embedding thread (built-in embedder), by its commit notifier. */
const threads = new WeakMap<object, EmbedThread>();

/**
 * Embeds up to one batch of pending memories (stored while the endpoint was down, queued by
 * `memd reindex`, or stored with the built-in embedder, which embeds after the commit). Returns
 * how many got a vector; throws EmbedError when the call fails.
 */
export async function embedPendingBatch(core: Core<Embeddings>): Promise<number> {
  const s = embedSettings(core.config);
  if (!s) return 0;
  // The built-in embedder: on the server's embedding thread when it has one (not on this one).
  const thread = s.builtin ? threads.get(core.notifier) : undefined;
  const elsewhere = core.storage.vectorsElsewhere;
  if (thread && elsewhere) {
    // LMDB: the thread reads the queue and writes the vectors too; this one only follows them.
    const done = elsewhere.begin();
    let touched: VectorKey[] = [];
    try {
      const stored = await thread.store({
        dataDir: elsewhere.dataDir,
        mapSizeMb: elsewhere.mapSizeMb,
        limit: threadBatchSize,
      });
      touched = stored.touched;
      return stored.read;
    } finally {
      done(touched);
    }
  }
  const pending = await core.storage.pendingEmbeddings(batchSize);
  if (pending.length === 0) return 0;
  const texts = pending.map((p) => p.content);
  const vectors = thread ? await thread.embed(texts) : await embedTexts(s, texts, newCost());
  // A memory changed meanwhile keeps its newer state (setVectors checks updatedAt).
  await core.storage.setVectors(pending.map((p, i) => ({ id: p.id, updatedAt: p.updatedAt, vector: vectors[i] })));
  return pending.length;
}

/**
 * The built-in embedder's backlog, per server: memories committed "pending" and not yet embedded.
 * `dirty` is set after each commit of this process (through the commit notifier) and cleared
 * before a pass reads the queue, so a commit is never missed; one pass runs at a time.
 */
interface Backlog {
  dirty: boolean;
  /** Memories a batch takes at most (batchSize, or threadBatchSize on the thread writing them). */
  perBatch: number;
  running?: Promise<void>;
  /** Called after each batch a pass embeds (catchUp waits on them). */
  afterBatch: Set<() => void>;
  /** The server is stopping: a pass ends after its batch. */
  stopped?: boolean;
}

const backlogs = new WeakMap<object, Backlog>();

/** How long after a commit the built-in embedder's background pass starts (startEmbedWorker). */
const passDelayMs = 200;

/**
 * Memories a search embeds, at most, before it answers; more are found by their words meanwhile.
 * (On LMDB, where a batch of the thread's is this many: the batch under way and one more.)
 */
export const searchCatchUp = 4 * batchSize;

/** Embeds pending memories until the queue is empty or `max` were embedded. */
function drain(core: Core<Embeddings>, b: Backlog, max: number): Promise<void> {
  b.running ??= (async () => {
    try {
      for (let done = 0; done < max && !b.stopped; ) {
        b.dirty = false;
        const n = await embedPendingBatch(core);
        done += n;
        for (const f of b.afterBatch) f();
        if (n < b.perBatch) return;
      }
      b.dirty = true;
    } finally {
      b.running = undefined;
    }
  })();
  return b.running;
}

/**
 * Before a search with the built-in embedder: embeds what this server committed and has not
 * embedded yet (at most searchCatchUp memories), so a memory stored a moment ago is found by its
 * meaning. Without a backlog it costs nothing.
 */
export async function catchUp(core: Core<Embeddings>): Promise<void> {
  const b = backlogs.get(core.notifier);
  if (!b) return;
  // Bounded in time too: a search never waits long on the backlog (what it misses, it finds by words).
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, catchUpMaxMs);
  });
  await Promise.race([catchUpBatches(b, core), late]);
  clearTimeout(timer);
}

/** Longest a search waits on the built-in embedder's backlog. */
const catchUpMaxMs = 1000;

async function catchUpBatches(b: Backlog, core: Core<Embeddings>): Promise<void> {
  // A pass under way (a bulk load's may run long): its next batches, as many as a pass of our own.
  const batches = Math.max(2, searchCatchUp / b.perBatch);
  for (let batch = 0; batch < batches; batch++) {
    if (b.running) {
      const running = b.running;
      await new Promise<void>((resolve) => {
        const done = () => {
          b.afterBatch.delete(done);
          resolve();
        };
        b.afterBatch.add(done);
        running.then(done, done);
      });
    } else if (b.dirty)
      // A failure is logged by the background pass that retries; the search finds by words meanwhile.
      return drain(core, b, Math.max(b.perBatch, searchCatchUp - batch * b.perBatch)).catch(() => {});
    else return;
  }
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
 * With the built-in embedder it also runs soon after each commit of this server. Does nothing
 * without an embedding model. Returns the stop function.
 */
export function startEmbedWorker(core: Core<Embeddings>, o: WorkerOptions = {}): () => Promise<void> {
  const s = embedSettings(core.config);
  if (!s) return async () => {};
  const interval = o.intervalMs ?? 500;
  const maxBackoff = o.maxBackoffMs ?? 30_000;
  let backoff = interval;
  let stopped = false;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let running: Promise<void> = Promise.resolve();
  const schedule = (ms: number) => {
    if (!stopped) timer = setTimeout(tick, ms);
  };
  let backlog: Backlog | undefined;
  // With the built-in embedder a tick is a pass of its own (one at a time: never the same
  // pending memories twice at once), which runs until the queue is empty.
  const work = (): Promise<number> =>
    backlog ? drain(core, backlog, Number.POSITIVE_INFINITY).then(() => 0) : embedPendingBatch(core);
  const tick = () => {
    running = work()
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
  let unsubscribe = () => {};
  if (s.builtin) {
    const b: Backlog = {
      dirty: true,
      perBatch: core.storage.vectorsElsewhere ? threadBatchSize : batchSize,
      afterBatch: new Set(),
    };
    backlog = b;
    backlogs.set(core.notifier, b);
    const thread = startEmbedThread();
    threads.set(core.notifier, thread);
    // On LMDB the first look for pending memories (a tick) starts the thread anyway: started now,
    // it has read its modules and table before the first stores come (from source that takes ~1
    // s under load, and a search right after the first stores waits at most catchUpMaxMs).
    if (core.storage.vectorsElsewhere) thread.warm();
    // A while after a commit, so that a burst of stores is embedded in full batches: each pass
    // reads the queue and writes its vectors in a transaction of its own beside the stores'.
    // bench/default-embedder.ts, 2,000 stores 8 at a time, store p50 against --embedder none's in
    // the same run: 5 ms after, 6.98 against 1.68 ms; 50 ms, 5.48 against 3.57; 200 ms, 4.08 against 2.50.
    let soon: ReturnType<typeof setTimeout> | undefined;
    unsubscribe = core.notifier.subscribeAll(() => {
      b.dirty = true;
      // The first commit starts the thread (reading its modules and table takes a while, from
      // source most), so that a search right after the first stores finds them embedded.
      thread.warm();
      soon ??= setTimeout(() => {
        soon = undefined;
        if (!stopped)
          drain(core, b, Number.POSITIVE_INFINITY).catch((e) =>
            core.logger.error("embedding worker failed", { error: String(e) }),
          );
      }, passDelayMs);
    });
  }
  schedule(interval);
  return async () => {
    stopped = true;
    if (backlog) backlog.stopped = true;
    unsubscribe();
    clearTimeout(timer);
    await running.catch(() => {});
    await backlogs.get(core.notifier)?.running?.catch(() => {});
    threads.get(core.notifier)?.stop();
    threads.delete(core.notifier);
  };
}
