// The embedding queue's reads and vector writes that the built-in embedder's thread (a Worker:
// embedding/embed-thread.ts) makes on its own handle of the environment (embedPendingElsewhere),
// shared with embeddings.ts. Its imports are what that thread loads of the storage, so they stay
// few: not the search engine, nor the keyword lists and their languages.
import type { RootDatabase } from "lmdb";
import { isCurrent, type MemoryRecord } from "../records";
import type { PendingEmbedding, VectorKey } from "../storage";
import { openEnv } from "./env";
import { IndexWriter } from "./index-writer";
import type { Dbs } from "./layout";
import { Writes } from "./staging";

type VectorItem = { id: string; updatedAt: number; vector: Float32Array | number[] };

/** Up to `limit` current memories waiting for an embedding, oldest first. */
export function pendingIn(dbs: Dbs, limit: number): PendingEmbedding[] {
  const now = Date.now();
  const out = [];
  for (const id of dbs.embedPending.getKeys({ limit: limit * 2 })) {
    const r = dbs.memories.get(id as string) as MemoryRecord | undefined;
    if (isCurrent(r, now)) out.push({ id: r.id, content: r.content, updatedAt: r.updatedAt });
    if (out.length >= limit) break;
  }
  return out;
}

/**
 * Stages the vectors of memories still current, unchanged since `updatedAt` and queued; returns
 * the IndexWriter (its vectorsTouched) and how many.
 */
export function stageVectors(dbs: Dbs, w: Writes, items: readonly VectorItem[]): { ix: IndexWriter; n: number } {
  const ix = new IndexWriter(dbs, w);
  let n = 0;
  for (const it of items) {
    const r = dbs.memories.get(it.id) as MemoryRecord | undefined;
    if (r?.state !== "current" || r.updatedAt !== it.updatedAt || dbs.embedPending.get(it.id) === undefined) continue;
    ix.setVector(r, it.vector);
    n++;
  }
  // A new mark for each commit of the worker's (whose vectors come without an event): a vector
  // snapshot taken at another mark catches up by walking its namespace's keys (vector-cache.ts).
  if (n > 0) w.put(dbs.meta, "vectorMark", Math.random());
  return { ix, n };
}

/** This thread's handles of environments another thread opened (embedPendingElsewhere). */
const handles = new Map<string, { env: RootDatabase; dbs: Dbs }>();

/**
 * On another thread of the process that opened the store in `at.dataDir` (the built-in
 * embedder's: embedding/embed-thread.ts), on this thread's own handle of the same environment
 * (lmdb-js shares one between a process's threads): embeds up to `limit` pending memories with
 * `embed` and stores their vectors in one durable transaction. Returns how many were read, and
 * the vector keys written, for the opening thread's in-memory vectors (Embeddings.vectorsElsewhere).
 */
export async function embedPendingElsewhere(
  at: { dataDir: string; mapSizeMb?: number },
  embed: (texts: string[]) => Float32Array[],
  limit: number,
): Promise<{ read: number; touched: VectorKey[] }> {
  let h = handles.get(at.dataDir);
  if (!h) {
    h = openEnv(at.dataDir, { mapSizeMb: at.mapSizeMb });
    handles.set(at.dataDir, h);
  }
  const { env, dbs } = h;
  // A fresh read: lmdb-js renews a thread's read transaction on a timer after its first read,
  // and a message can come before it fires, so the queue would be read as of an earlier batch
  // (missing what was stored since: a search's catch-up then found nothing to wait for).
  env.resetReadTxn();
  const pending = pendingIn(dbs, limit);
  if (pending.length === 0) return { read: 0, touched: [] };
  const vectors = embed(pending.map((p) => p.content));
  const items = pending.map((p, i) => ({ id: p.id, updatedAt: p.updatedAt, vector: vectors[i] }));
  // A synchronous transaction: it blocks only this thread, and nothing is handed to the opening
  // one (an async one's callback is synchronised with lmdb-js's write thread; measured, it cost
  // more CPU in all). Answered once durable, as a write of the opening thread is.
  let touched: VectorKey[] = [];
  env.transactionSync(() => {
    const w = new Writes();
    touched = stageVectors(dbs, w, items).ix.vectorsTouched;
    w.apply();
  });
  await env.flushed;
  return { read: pending.length, touched };
}
