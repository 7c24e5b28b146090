// LMDB writes: a write plan run durably in one transaction (writeDurably, write), and the apply
// path of memory changes, where applies arriving together share one write transaction (group
// commit) and each op is planned by the shared planOp and staged with its event and indexes.
import type { RootDatabase } from "lmdb";
import {
  checkKeyFree,
  entityGuardOf,
  keyedOutcome,
  keyOfOp,
  type Planned,
  planOp,
  targetIsLive,
  targetOf,
  vectorOf,
} from "../ops";
import type { EventRecord, IdempotencyEntry, MemoryRecord } from "../records";
import {
  type Applied,
  IdempotencyKeyTaken,
  type IdempotencyRecord,
  type MemoryOp,
  StorageError,
  WriteConflict,
} from "../storage";
import { IndexWriter, indexChange } from "./index-writer";
import { END, keys } from "./layout";
import { putEvent, Writes } from "./staging";
import { flushed, getRecord, type LmdbState, type Pending } from "./state";

/**
 * Runs a write plan durably. The in-memory keyword lists and vectors follow what it committed:
 * every IndexWriter the plan made is collected (IndexWriter.collect), and the memories and
 * vectors it touched are re-read from LMDB afterwards (harmless if nothing was committed).
 */
export async function write<T>(s: LmdbState, plan: (w: Writes) => T): Promise<T> {
  const writers: IndexWriter[] = [];
  const token = {};
  s.inflight.set(token, s.clock.handedOut);
  try {
    return await writeDurably(
      s.env,
      () => flushed(s),
      (w) => IndexWriter.collect(writers, () => plan(w)),
    );
  } finally {
    for (const ix of writers) {
      s.vectorCache.refresh(ix.vectorsTouched, ix.order);
      s.keywordCache.refresh(ix.keywordTouched, ix.order);
    }
    s.inflight.delete(token);
  }
}

/** Applies `item`'s ops in the write transaction being set up, or in a new one (see runBatch). */
export function enqueue(s: LmdbState, item: Pending) {
  if (s.pending) s.pending.push(item);
  else {
    s.pending = [item];
    runBatch(s, s.pending);
  }
}

/** Stages the writes of one planned op and returns what it did. */
export function stage(
  s: LmdbState,
  w: Writes,
  ix: IndexWriter,
  op: MemoryOp,
  p: Planned,
  seq: number,
  overlay: Map<string, MemoryRecord>,
): Applied {
  const { dbs } = s;
  // The planned event is this plan's own: its seq is added in place.
  const event = p.event as EventRecord;
  event.seq = seq;
  putEvent(w, dbs, event);
  if (p.created) {
    const r = p.created;
    w.put(dbs.memories, r.id, r);
    w.put(dbs.entityMemories, keys.entityMemory(r.namespace, r.entity, r.id), null);
    if (r.expiresAt !== undefined) w.put(dbs.expiries, keys.expiry(r.expiresAt, r.id), null);
    if (r.key !== undefined) w.put(dbs.memoryKeys, keys.memoryKey(r.namespace, r.entity, r.key), r.id);
    overlay.set(r.id, r);
    // namespace_memories, the keyword index and the vectors (search.ts).
    indexChange(ix, undefined, r, vectorOf(op));
    if (r.state === "current") ix.created.set(r.id, r);
  }
  if (p.target && p.target !== overlay.get(p.target.id)) {
    const r = p.target;
    const before = overlay.get(r.id);
    w.put(dbs.memories, r.id, r);
    overlay.set(r.id, r);
    const was = before?.state === "current";
    const is = r.state === "current";
    if (was && before.expiresAt !== undefined && (!is || before.expiresAt !== r.expiresAt))
      w.remove(dbs.expiries, keys.expiry(before.expiresAt, r.id));
    if (is && r.expiresAt !== undefined && (!was || before.expiresAt !== r.expiresAt))
      w.put(dbs.expiries, keys.expiry(r.expiresAt, r.id), null);
    if (was !== is) {
      const entry = keys.entityMemory(r.namespace, r.entity, r.id);
      if (is) w.put(dbs.entityMemories, entry, null);
      else w.remove(dbs.entityMemories, entry);
      // A key is held by its current memory only: retiring the memory frees it.
      if (r.key !== undefined) {
        const k = keys.memoryKey(r.namespace, r.entity, r.key);
        if (is) w.put(dbs.memoryKeys, k, r.id);
        else w.remove(dbs.memoryKeys, k);
      }
    }
    // namespace_memories, the keyword index and vectors follow the memory in this same transaction.
    indexChange(ix, before, r, p.created ? undefined : vectorOf(op));
  }
  return { event, memory: p.created ?? p.target! };
}

/**
 * Plans one apply's ops into `w` and `ix`; `overlay` holds the records changed so far in the
 * batch, `answers` the Idempotency-Keys answered so far in it.
 */
function plan(
  s: LmdbState,
  w: Writes,
  ix: IndexWriter,
  overlay: Map<string, MemoryRecord>,
  item: Pending,
  answers = new Set<string>(),
) {
  const { ops, actorKeyId, now, idempotency } = item;
  const kept = idempotency && keptAnswer(s, idempotency, now, answers);
  const applied = ops.map((op): Applied | null => {
    const id = targetOf(op);
    let target: MemoryRecord | undefined;
    if (id !== undefined) {
      target = overlay.get(id) ?? getRecord(s, id);
      // A guarded write checks its entity first, whatever the op finds (see RevertOp).
      const guard = entityGuardOf(op);
      if (guard !== undefined && target) checkEntityUnchanged(s, overlay, target, guard);
      if (!targetIsLive(op, target, now)) return null;
      if (op.event === "REVERT") {
        const k = keyOfOp(op);
        if (k) checkKeyFree(op, keyHolder(s, overlay, k));
      }
      overlay.set(id, target);
    } else if (op.event === "ADD" && op.create.key !== undefined) {
      const holder = keyHolder(s, overlay, keyOfOp(op)!);
      const outcome = keyedOutcome(op, holder, now);
      if (outcome === "unchanged") return null;
      if (outcome === "update") {
        target = holder;
        overlay.set(holder!.id, holder!);
      }
    }
    const namespace = op.event === "ADD" || op.event === "REPLACE" ? op.create.namespace : target!.namespace;
    const { seq, atMs } = s.clock.next(namespace, now);
    return stage(s, w, ix, op, planOp(op, target, atMs, actorKeyId), seq, overlay);
  });
  if (idempotency && keepAnswer(s, w, idempotency, now, kept, applied))
    answers.add(JSON.stringify([idempotency.keyId, idempotency.key]));
  return applied;
}

/**
 * A restore's guard (RevertOp.entityLastEventAtMs): the entity's newest committed event is still
 * the one it planned from, and no earlier apply of this batch (the overlay) changed the entity.
 */
function checkEntityUnchanged(s: LmdbState, overlay: Map<string, MemoryRecord>, m: MemoryRecord, at: number) {
  const { namespace: ns, entity } = m;
  const [last] = s.dbs.eventsByEntity.getKeys({ start: [ns, entity, END], end: [ns, entity], reverse: true, limit: 1 });
  const changed =
    ((last as unknown[] | undefined)?.[2] ?? 0) !== at ||
    [...overlay.values()].some((r) => r.entity === entity && r.namespace === ns);
  if (changed) throw new WriteConflict("changed", `entity ${entity} changed while the restore was planned; try again`);
}

/**
 * The memory holding a key as this transaction sees it: one the batch staged (the overlay),
 * else the one memory_keys names. Its state may be anything; keyedOutcome judges it.
 */
export function keyHolder(
  s: LmdbState,
  overlay: Map<string, MemoryRecord>,
  k: { namespace: string; entity: string; key: string },
): MemoryRecord | undefined {
  for (const r of overlay.values())
    if (r.key === k.key && r.state === "current" && r.entity === k.entity && r.namespace === k.namespace) return r;
  const id = s.dbs.memoryKeys.get(keys.memoryKey(k.namespace, k.entity, k.key)) as string | undefined;
  return id === undefined ? undefined : (overlay.get(id) ?? getRecord(s, id));
}

/**
 * The entry stored for an apply's Idempotency-Key, or undefined when there is none or it
 * expired (or is a pending claim of an older release, which nothing finishes now). Throws
 * IdempotencyKeyTaken when an answer is kept, also by an earlier apply of the same batch (in
 * `answers`, staged and not yet readable), so that nothing of this apply is written.
 */
function keptAnswer(s: LmdbState, r: IdempotencyRecord, now: number, answers: Set<string>) {
  const { dbs } = s;
  if (answers.has(JSON.stringify([r.keyId, r.key]))) throw new IdempotencyKeyTaken();
  const e = dbs.idempotency.get(keys.idempotency(r.keyId, r.key)) as IdempotencyEntry | undefined;
  if (e?.state === "done" && e.expiresAt > now) throw new IdempotencyKeyTaken();
  return e;
}

/** Stages the answer of an apply with an Idempotency-Key, replacing an expired or pending entry. */
function keepAnswer(
  s: LmdbState,
  w: Writes,
  r: IdempotencyRecord,
  now: number,
  old: IdempotencyEntry | undefined,
  applied: (Applied | null)[],
): boolean {
  const { dbs } = s;
  const answer = r.answer(applied);
  if (!answer) return false;
  if (old) w.remove(dbs.idempotencyExpiries, keys.idempotencyExpiry(old.expiresAt, r.keyId, r.key));
  const entry: IdempotencyEntry = {
    keyId: r.keyId,
    key: r.key,
    hash: r.hash,
    state: "done",
    status: answer.status,
    body: answer.body,
    createdAt: now,
    expiresAt: r.expiresAt,
  };
  w.put(dbs.idempotency, keys.idempotency(r.keyId, r.key), entry);
  w.put(dbs.idempotencyExpiries, keys.idempotencyExpiry(r.expiresAt, r.keyId, r.key), null);
  return true;
}

/**
 * Applies that arrive while a write transaction is being set up share it (group commit, as
 * lmdb-js batches transactions), planned in one callback instead of one transaction callback
 * each. Each apply still acts as if alone, in arrival order: later ones see the records
 * of earlier ones through the shared overlay. If any plan throws, the batch is planned again
 * one apply at a time, so only that apply fails and writes nothing.
 */
function runBatch(s: LmdbState, batch: Pending[]) {
  const { env, dbs, clock, indexOn, vectorCache, keywordCache } = s;
  const results: (Applied | null)[][] = [];
  const failures = new Map<number, unknown>();
  // The in-memory keyword lists and vectors follow the commit, as in write().
  const writers: IndexWriter[] = [];
  const token = {};
  s.inflight.set(token, clock.handedOut);
  // (Committed: the records created are handed to the keyword lists, and the vectors written to
  // the vectors, see NamespaceCache.refresh.)
  const refreshCaches = (committed: boolean) => {
    for (const ix of writers) {
      vectorCache.refresh(
        ix.vectorsTouched,
        ix.order,
        undefined,
        committed && ix.applied ? ix.vectorsWritten : undefined,
      );
      keywordCache.refresh(ix.keywordTouched, ix.order, committed && ix.applied ? ix.created : undefined);
    }
    s.inflight.delete(token);
  };
  env
    .transaction(() =>
      IndexWriter.collect(writers, () => {
        if (s.pending === batch) s.pending = undefined;
        clock.sync();
        const w = new Writes();
        const ix = new IndexWriter(dbs, w, indexOn);
        try {
          const overlay = new Map<string, MemoryRecord>();
          const answers = new Set<string>();
          for (const item of batch) results.push(plan(s, w, ix, overlay, item, answers));
        } catch {
          results.length = 0;
        }
        if (results.length === batch.length) {
          w.apply();
          ix.applied = true;
          return;
        }
        batch.forEach((item, i) => {
          const w = new Writes();
          const ix = new IndexWriter(dbs, w, indexOn);
          try {
            results.push(plan(s, w, ix, new Map(), item));
          } catch (e) {
            results.push([]);
            failures.set(i, e);
            return;
          }
          w.apply();
          ix.applied = true;
        });
      }),
    )
    .then(() => flushed(s))
    .then(
      () => {
        refreshCaches(true);
        batch.forEach((item, i) => {
          if (failures.has(i)) item.reject(failures.get(i));
          else item.resolve(results[i]);
        });
      },
      (e) => {
        refreshCaches(false);
        if (s.pending === batch) s.pending = undefined;
        for (const item of batch) item.reject(storageError(e));
      },
    );
}

/**
 * Runs `plan` inside one LMDB write transaction (batched with concurrent ones into a shared
 * commit) and resolves with its result once the commit is flushed to disk. `plan` reads the
 * store as it is and stages its changes in `w`; they are applied only if it returns, so a plan
 * that throws writes nothing. Staging instead of a child transaction keeps "both or neither"
 * at a quarter of the cost per request. A plan does not see its own staged writes.
 */
export async function writeDurably<T>(
  env: RootDatabase,
  flushed: () => Promise<void>,
  plan: (w: Writes) => T,
): Promise<T> {
  let result: T | undefined;
  let failure: unknown;
  try {
    await env.transaction(() => {
      const w = new Writes();
      try {
        result = plan(w);
      } catch (e) {
        failure = e;
        return;
      }
      w.apply();
    });
    if (failure === undefined) await flushed();
  } catch (e) {
    throw storageError(e);
  }
  if (failure !== undefined) throw failure;
  return result as T;
}

function storageError(e: unknown): unknown {
  const message = String((e as Error)?.message ?? e);
  if (/MDB_MAP_FULL|ENOSPC|No space left/i.test(message))
    return new StorageError("storage_full", "the store is full; raise --map-size-mb or free disk space");
  return e;
}
