// LMDB's keyword lists: one KeywordSpace (../keyword-space.ts) per namespace searched. LMDB holds
// what it is built from: the namespace's current memories (namespace_memories, written in the
// apply transaction) and their records, whose content is tokenized here (format 6; format 5
// stored the terms, at 3-5 µs of a raw store's CPU, for namespaces never searched too). It is
// built on the namespace's first search (in slices: touched.ts) and kept in step by the storage
// after each committed write that changed it (it re-reads those memories from LMDB and indexes
// what is current, so it follows the committed state whatever order commits land in).
import { rmSync } from "node:fs";
import { type DocTerms, KeywordSpace, packTerms } from "../keyword-space";
import type { EventRecord, MemoryRecord } from "../records";
import { dropSnapshots, readSnapshot, type SnapshotJob, snapshotJob, writeSnapshot } from "./keyword-snapshot";
import { type Dbs, END } from "./layout";
import { loadSlice, NamespaceCache } from "./touched";

/** The in-memory postings of every namespace searched so far. */
export type KeywordCache = NamespaceCache<KeywordSpace, DocTerms>;

/**
 * How many namespaces' lists were read from a snapshot in this process on a first search
 * (restored), and how many times lists were replaced by the snapshot just written of them
 * (reloaded); for tests.
 */
export const snapshotStats = { restored: 0, reloaded: 0 };

/**
 * When a namespace's lists are saved again: after this many changes (and a tenth of its size)
 * since the last save; and what a save awaits between its pieces (one turn of the event loop, so
 * requests are served while it writes; tests make it wait).
 */
export const snapshotting = {
  after: 10_000,
  /** How long a save may hold the turn before it awaits `between` (tests set 0: after every piece). */
  turnMs: 4,
  between: (): Promise<unknown> => new Promise((resolve) => setImmediate(resolve)),
};

/**
 * The keyword lists of every namespace searched so far. With `dataDir`, each is saved in a
 * snapshot beside the store (keyword-snapshot.ts) and read back, caught up, on its first search.
 */
export function keywordCache(
  dbs: Dbs,
  dataDir?: string,
  settledSeq: () => number = () => Number.POSITIVE_INFINITY,
): KeywordCache & { save(): Promise<void>; forget(ns: string): void } {
  /**
   * A memory's terms, from its record, if namespace_memories lists it under `namespace`: a memory
   * is listed exactly while its record is current (both written in one transaction), and never
   * changes namespace, so the record alone answers.
   */
  const termsOf = (namespace: string, id: string): DocTerms | undefined => {
    const r = dbs.memories.get(id) as MemoryRecord | undefined;
    return r?.state === "current" && r.namespace === namespace
      ? packTerms(r.content, r.createdAt, r.entity)
      : undefined;
  };
  const stamp = () => ({
    format: (dbs.meta.get("format") as number | undefined) ?? 0,
    clockEpoch: (dbs.meta.get("clockEpoch") as number | undefined) ?? 0,
    searchEpoch: (dbs.meta.get("searchEpoch") as number | undefined) ?? 0,
  });
  /**
   * The time of the namespace's newest event whose seq is at most `seq` (0 if none). Per
   * namespace, times and seqs grow together (both are handed out in commit order), so every
   * event of a later seq is at that time or after.
   */
  const settledAt = (ns: string, seq: number) => {
    for (const key of dbs.eventsByNs.getKeys({ start: [ns, END], end: [ns], reverse: true }))
      if ((key as [string, number, number])[2] <= seq) return (key as [string, number, number])[1];
    return 0;
  };
  /**
   * Per loaded space: its namespace, changes since its last save began, whether a save is
   * queued, the save being written, and (restored) the time to catch up from.
   */
  type State = {
    ns: string;
    changes: number;
    queued: boolean;
    job?: SnapshotJob;
    from?: { atMs: number; atSeq: number };
  };
  const state = new Map<KeywordSpace, State>();
  /** Saves run one at a time, in the order queued. */
  let saving: Promise<void> = Promise.resolve();
  const save = async (s: KeywordSpace) => {
    const st = state.get(s);
    if (!st) return;
    st.queued = false;
    if (!dataDir || s.stats.docs === 0) return;
    // Both in the same turn as the lists: every event up to the settled seq is committed and
    // followed by them; the load catches up from its time on. What the snapshot holds is fixed
    // here (freeze); the lists go on following commits while it is written.
    const atSeq = settledSeq();
    const atMs = settledAt(st.ns, atSeq);
    const frozen = s.freeze();
    st.changes = 0;
    const job = snapshotJob(dataDir, st.ns);
    st.job = job;
    try {
      const written = await writeSnapshot(dataDir, st.ns, { ...stamp(), atMs, atSeq }, frozen, job, snapshotting);
      // The namespace is read again from the file just written (mapped, caught up), which then
      // takes the place of these lists: built from the records, or copied out of an older file
      // by the changes since, they are on the heap.
      if (written && state.get(s) === st) cache.reload(st.ns);
    } catch {
      // A snapshot is an optimisation: without one the next start rebuilds the lists.
    } finally {
      frozen.release();
      if (st.job === job) st.job = undefined;
    }
  };
  const queue = (s: KeywordSpace) => {
    const st = state.get(s);
    if (!st || st.queued || !dataDir) return;
    st.queued = true;
    saving = saving.then(() => (state.get(s) === st ? save(s) : undefined)).catch(() => undefined);
  };
  /** Calls off a save being written: it is not renamed into place, and its temporary file is gone now. */
  const cancel = (st: State) => {
    if (!st.job) return;
    st.job.cancelled = true;
    rmSync(st.job.tmp, { force: true });
    st.job = undefined;
  };
  const changed = (s: KeywordSpace) => {
    const st = state.get(s);
    if (st && ++st.changes >= Math.max(snapshotting.after, s.stats.docs / 10)) queue(s);
  };
  const cache = new NamespaceCache<KeywordSpace, DocTerms>({
    empty: (ns, reload) => {
      // (A reload reads the file this process has just written: its hashes are not checked again.)
      const found = dataDir ? readSnapshot(dataDir, ns, stamp(), !reload) : undefined;
      if (reload && !found) return undefined;
      if (found && reload) snapshotStats.reloaded++;
      else if (found) snapshotStats.restored++;
      const s = found ? KeywordSpace.fromParts(found.parts) : new KeywordSpace();
      state.set(s, { ns, changes: 0, queued: false, from: found?.at });
      return s;
    },
    load: (s, ns, after, limit) => {
      const st = state.get(s)!;
      if (st.from !== undefined) {
        // Restored: re-read every memory the namespace's events name since the snapshot.
        const ids = new Set<string>();
        // (From its time on; of that time, the events after its seq: the others are in it.)
        const start = [ns, st.from.atMs, st.from.atSeq + 1];
        for (const key of dbs.eventsByNs.getKeys({ start, end: [ns, END] })) {
          const e = dbs.events.get((key as unknown[])[2] as number) as EventRecord | undefined;
          if (!e) continue;
          ids.add(e.memoryId);
          if (e.mergedFromId) ids.add(e.mergedFromId);
        }
        for (const id of ids) {
          const terms = termsOf(ns, id);
          if (terms) s.add(id, terms);
          else s.remove(id);
        }
        st.changes = ids.size;
        return undefined;
      }
      return loadSlice(dbs.namespaceMemories, ns, after, limit, (key) => {
        const terms = termsOf(ns, key[1] as string);
        if (terms) s.add(key[1] as string, terms, true);
      });
    },
    loaded: (s) => {
      const st = state.get(s);
      if (st?.from === undefined) {
        // Built from the records: saved behind this search, so the next start reads it, and read
        // back in place of these lists once saved (so their spare room is not worth dropping
        // first: a copy of every array, hundreds of milliseconds at 1,000,000). Without
        // snapshots they stay: trimmed.
        if (!dataDir) s.trim();
        else if (st) queue(s);
      } else st.from = undefined;
    },
    replaced: (old) => {
      const st = state.get(old);
      if (st) cancel(st);
      state.delete(old);
    },
    keep: (s) => {
      const keep = s.stats.docs > 0;
      if (!keep) {
        const st = state.get(s);
        if (st) cancel(st);
        state.delete(s);
      }
      return keep;
    },
    read: ([ns, , id]) => termsOf(ns, id),
    drop: (s, [, , id]) => {
      s.remove(id);
      changed(s);
    },
    put: (s, [, , id], terms) => {
      s.add(id, terms);
      changed(s);
    },
  });
  const clear = cache.clear.bind(cache);
  return Object.assign(cache, {
    clear() {
      for (const st of state.values()) cancel(st);
      state.clear();
      clear();
    },
    /** Saves every loaded namespace changed since its last save began, after the saves under way (at close). */
    async save() {
      for (const [s, st] of state) if (st.changes !== 0 && st.from === undefined) queue(s);
      await saving;
    },
    /**
     * Deletes a namespace's snapshot (after an erasure in it; a save under way is called off,
     * it may hold the erased words); its lists are saved again later.
     */
    forget(ns: string) {
      for (const st of state.values())
        if (st.ns === ns) {
          cancel(st);
          st.changes = Math.max(st.changes, 1);
        }
      if (dataDir) dropSnapshots(dataDir, ns);
    },
  });
}
