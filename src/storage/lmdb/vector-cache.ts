// LMDB's in-memory vectors: one VectorSpace (src/index/vector/space.ts) per namespace searched, built
// from the `vectors` sub-database on the namespace's first semantic search (in slices:
// touched.ts) and kept in step by the storage after each committed write that touched vectors:
// with the vectors the commit wrote while no later commit can have changed them, else read again
// from LMDB (NamespaceCache.refresh), so it follows the committed state whatever order commits
// land in. Beside the codes, a 4-bit copy of each vector (src/index/vector/four-bit.ts) ranks a search's
// candidates, and only the best few are read from LMDB and scored exactly (search.ts).
// A first load reads the namespace in key order, which is by entity; so that the codes' mean and
// the cells' centres are not its first entities' alone (an entity's memories share topics), a
// namespace of at least `ann.cellsFrom` vectors is sampled first (its keys walked, a uniform
// sample of them kept, those vectors read) and the space primed with them (VectorSpace.prime).
// With a data dir, a namespace of at least `vectorSnapshots.from` vectors is saved in a file once
// loaded (vector-snapshot.ts), and its first load after a start reads that file and catches up
// (see Restored) instead of reading every vector.
import { rmSync } from "node:fs";
import type { Key } from "lmdb";
import { ann, FourBit, VectorSpace, xorshift } from "../../index/vector";
import type { EventRecord, MemoryRecord } from "../records";
import type { SearchMemory } from "../search-memory";
import { latestCommitOrder } from "./commit-order";
import { type Dbs, END } from "./layout";
import { NamespaceCache, settledAt, snapshotStamp } from "./touched";
import {
  dropVectorSnapshot,
  readVectorSnapshot,
  type VectorJob,
  vectorJob,
  writeVectorSnapshot,
} from "./vector-snapshot";

/**
 * Whether first loads sample the namespace first (tests turn it off to compare), and from how
 * many vectors a namespace too small for cells is primed with the mean of `meanSample` of them
 * (no recentring, each of which reads every vector again: a namespace followed as it grows is
 * loaded from at least vectorSnapshots.from).
 */
export const vectorLoading = { sample: true, meanFrom: 10_000, meanSample: 4096, listedKeys: 1 << 17 };

/** Vector snapshots (tests make them small). */
export const vectorSnapshots = {
  /** A namespace of at least this many vectors is saved once loaded... */
  from: 10_000,
  /** ...and again once this share of its vectors changed since (a reader's catching up is that long). */
  again: 0.25,
  /** What runs between the MiBs a save writes. */
  between: (): Promise<unknown> => new Promise((resolve) => setImmediate(resolve)),
  /** How often namespaces taking vectors are looked at (see follow). */
  followMs: 1000,
};

/**
 * A copy read from its snapshot, catching up: first the vector of every memory named by the
 * namespace's events after the snapshot's (`events`), then a walk of the namespace's vector keys
 * (`keys`: each row of the snapshot met is `seen`; a key it lacks is read and added), and last the
 * rows not met are removed (their vectors are gone).
 */
type Restored = {
  phase: "events" | "keys";
  /** Vectors it read again or dropped: saved again when as many as a save's changes (or at close). */
  changes: number;
  at: { atMs: number; atSeq: number; mark: number | null };
  cursor?: Key[];
  rows: number;
  seen?: Uint8Array;
  oddSeen: Set<string>;
};

/** A vector's key: [namespace, entity, memory id]. */
type VectorKey = [string, string, string];

/**
 * A first load's progress: walking the keys (a reservoir sample of them), reading the sample's
 * vectors (their sum), then reading every vector (after `cursor`).
 */
type Loading = {
  phase: "keys" | "sample" | "all";
  cursor?: Key[];
  /**
   * Every key the walk met (up to `listedKeys`): the "all" phase reads their vectors instead of
   * walking (and decoding) the keys again; a key added meanwhile is a commit's, read after the
   * load (touched.ts). `at`: the next to read.
   */
  keys?: VectorKey[];
  at: number;
  seen: number;
  sample: VectorKey[];
  next: number;
  sum?: Float64Array;
  summed: number;
  rand: () => number;
};

/** A stored vector's bytes as float32 (copied: the buffer may be reused by lmdb-js). */
const toFloats = (b: Uint8Array) => new Float32Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength));

let scratch = new Float32Array(0);
/**
 * A stored vector's bytes as float32, valid until the next read: a view of them when aligned,
 * else a copy in a buffer reused by the next call. For what is used at once (VectorSpace.set
 * copies what it keeps): no allocation and copy per vector followed or loaded.
 */
const transient = (b: Uint8Array) => {
  if (b.byteOffset % 4 === 0) return new Float32Array(b.buffer, b.byteOffset, b.byteLength >> 2);
  if (scratch.length !== b.byteLength >> 2) scratch = new Float32Array(b.byteLength >> 2);
  new Uint8Array(scratch.buffer).set(b.subarray(0, scratch.length * 4));
  return scratch;
};

/**
 * The in-memory vectors of every namespace searched so far; with a data dir, saved in snapshots:
 * `save` writes those changed since their last (at close), `forget` deletes a namespace's (an
 * erasure), `stats` counts them.
 */
export type VectorCache = NamespaceCache<VectorSpace, Float32Array> & {
  save(): Promise<void>;
  stop(): void;
  forget(namespace: string): void;
  /** Snapshots read, written, and read ones whose namespace's keys were walked (see Restored). */
  readonly snapshotStats: { read: number; written: number; walked: number };
};

/**
 * `memory`: the search-memory budget every namespace's vectors are counted in. `dataDir`: where
 * snapshots are kept (none without); `settledSeq`: the seq up to which every event is committed
 * and followed by the copies (state.ts).
 */
export function vectorCache(
  dbs: Dbs,
  memory?: SearchMemory,
  dataDir?: string,
  settledSeq: () => number = () => Number.POSITIVE_INFINITY,
  follow = false,
  quiet: () => boolean = () => false,
): VectorCache {
  /**
   * The stored bytes, without a copy: a plain view of lmdb-js's reused buffer (Uint8Array.set
   * refuses the Buffer getBinaryFast returns as it is).
   */
  const bytes = (ns: string, entity: string, id: string) => {
    const b = dbs.vectors.getBinaryFast([ns, entity, id] as unknown as string);
    return b && new Uint8Array(b.buffer, b.byteOffset, b.length);
  };
  const read = (ns: string, entity: string, id: string) => {
    const b = bytes(ns, entity, id);
    return b && toFloats(b);
  };
  /** As read, valid until the next read (see transient). */
  const readNow = (ns: string, entity: string, id: string) => {
    const b = bytes(ns, entity, id);
    return b && transient(b);
  };
  const loads = new WeakMap<VectorSpace, Loading>();
  const restored = new WeakMap<VectorSpace, Restored>();
  /** Per copy read from a snapshot: the vectors its catching up read again or dropped. */
  const caughtUp = new WeakMap<VectorSpace, number>();
  /** Per copy: its namespace, changes since its last save, and the save being written. */
  const saves = new WeakMap<VectorSpace, { ns: string; changes: number; job?: VectorJob }>();
  const jobs = new Map<string, VectorJob>();
  /** The copy made last per namespace (saved at close), and those read from a snapshot. */
  const copies = new Map<string, VectorSpace>();
  const thawedOnce = new WeakSet<VectorSpace>();
  /**
   * Each copy's 4-bit vectors. Those of a copy read from a snapshot are views of the file, mapped
   * (four-bit.ts thaw): copied out of it once the file is replaced or deleted (a save, an
   * erasure), so that no deleted file stays mapped (nor its disk space held) for as long as the
   * copy lives.
   */
  const keepers = new WeakMap<VectorSpace, FourBit>();
  /** Copies loaded whole (caught up): only those are saved. */
  const complete = new WeakSet<VectorSpace>();
  const snapshotStats = { read: 0, written: 0, walked: 0 };
  const stamp = () => snapshotStamp(dbs);
  /** A memory's vector as the namespace holds it now: [entity, vector (until the next read)], or undefined. */
  const current = (ns: string, id: string): [string, Float32Array] | undefined => {
    const r = dbs.memories.get(id) as MemoryRecord | undefined;
    if (r?.state !== "current" || r.namespace !== ns) return undefined;
    const v = readNow(ns, r.entity, id);
    return v && [r.entity, v];
  };
  /** One slice of catching a restored copy up (see Restored); the token returned means "more". */
  const catchUp = (s: VectorSpace, ns: string, st: Restored, limit: number): Key[] | undefined => {
    if (st.phase === "events") {
      const ids = new Set<string>();
      for (const key of dbs.eventsByNs.getKeys({ start: [ns, st.at.atMs, st.at.atSeq + 1], end: [ns, END] })) {
        const e = dbs.events.get((key as unknown[])[2] as number) as EventRecord | undefined;
        if (!e) continue;
        ids.add(e.memoryId);
        if (e.mergedFromId) ids.add(e.mergedFromId);
      }
      for (const id of ids) {
        const now = current(ns, id);
        s.set(id, now?.[0] ?? "", now?.[1]);
      }
      st.changes = ids.size;
      // No vector of the worker's committed since (its mark unchanged): nothing else to read.
      if (st.at.mark !== null && ((dbs.meta.get("vectorMark") as number | undefined) ?? 0) === st.at.mark) {
        caughtUp.set(s, st.changes);
        restored.delete(s);
        return undefined;
      }
      st.phase = "keys";
      snapshotStats.walked++;
      st.rows = s.rows;
      st.seen = new Uint8Array(s.rows);
      return [ns];
    }
    // Keys only: many per slice. (Rows below st.rows do not move meanwhile: this only adds.)
    let n = 0;
    const want = limit * 16;
    for (const key of dbs.vectors.getKeys({ start: st.cursor ?? [ns], end: [ns, END], limit: want + 1 })) {
      const k = key as Key[];
      if (st.cursor && n === 0 && k[1] === st.cursor[1] && k[2] === st.cursor[2]) continue;
      st.cursor = k;
      n++;
      const id = k[2] as string;
      const r = s.rowOfId(id);
      if (r >= 0 && r < st.rows) st.seen![r] = 1;
      else if (r === -2) st.oddSeen.add(id);
      else if (r === -1) {
        const v = readNow(ns, k[1] as string, id);
        if (v) s.set(id, k[1] as string, v);
        st.changes++;
      }
      if (n === want) return [ns];
    }
    const gone: string[] = [];
    for (let r = 0; r < st.rows; r++) if (!st.seen![r]) gone.push(s.idAt(r));
    for (const id of s.oddIds()) if (!st.oddSeen.has(id) && s.rowOfId(id) === -2) gone.push(id);
    for (const id of gone) s.set(id, "", undefined);
    st.changes += gone.length;
    caughtUp.set(s, st.changes);
    restored.delete(s);
    return undefined;
  };

  /** Saves run one at a time. */
  let saving: Promise<void> = Promise.resolve();
  /** Writes the copy's snapshot behind the store path (its arrays copied now: see freeze). */
  const save = (s: VectorSpace) => {
    const st = saves.get(s);
    if (!dataDir || !st || st.job || !complete.has(s) || s.size < vectorSnapshots.from) return Promise.resolve();
    // Both in this turn: every event up to the settled seq is committed and followed by the copy.
    const atSeq = settledSeq();
    const atMs = settledAt(dbs, st.ns, atSeq);
    // (With a write in flight, a vector of the worker's may be committed and not yet followed.)
    const mark = quiet() ? ((dbs.meta.get("vectorMark") as number | undefined) ?? 0) : null;
    const f = s.freeze();
    if (!f) return Promise.resolve();
    st.changes = 0;
    const job = vectorJob(dataDir, st.ns);
    st.job = job;
    jobs.set(st.ns, job);
    const run = async () => {
      try {
        const stampNow = { ...stamp(), atMs, atSeq, mark };
        const { header, sections, keeperAt } = f;
        if (
          await writeVectorSnapshot(dataDir, st.ns, stampNow, header, sections, keeperAt, job, vectorSnapshots.between)
        ) {
          snapshotStats.written++;
          keepers.get(s)?.own();
        }
      } catch {
        // A snapshot is an optimisation: without one the next start reads every vector.
      } finally {
        if (st.job === job) st.job = undefined;
        if (jobs.get(st.ns) === job) jobs.delete(st.ns);
      }
    };
    saving = saving.then(run, run);
    return saving;
  };
  /** A change followed by a loaded copy: saved again once enough changed. */
  const changed = (s: VectorSpace) => {
    const st = saves.get(s);
    if (!st) return;
    // (A namespace followed as it grows, unsearched, is saved after half its size in changes, as
    // its keyword lists are: a bulk load of 1,000,000 writes it ~7 times, not ~20.)
    const part = cache.searched(st.ns) ? vectorSnapshots.again : 0.5;
    if (++st.changes >= Math.max(vectorSnapshots.from, s.size * part)) void save(s);
  };

  /** One slice of a first load (see Loading); the token returned means "more". */
  const load = (s: VectorSpace, ns: string, limit: number, later?: (id: string) => boolean): Key[] | undefined => {
    const r = restored.get(s);
    if (r) return catchUp(s, ns, r, limit);
    let l = loads.get(s);
    if (!l) {
      l = {
        phase: vectorLoading.sample ? "keys" : "all",
        seen: 0,
        sample: [],
        next: 0,
        summed: 0,
        rand: xorshift(0x2545f491),
        keys: vectorLoading.sample ? [] : undefined,
        at: 0,
      };
      loads.set(s, l);
    }
    const size = ann.cellsFrom;
    if (l.phase === "keys") {
      // Keys only (the vectors' pages are not read): many per slice.
      let n = 0;
      const want = limit * 16;
      for (const key of dbs.vectors.getKeys({ start: l.cursor ?? [ns], end: [ns, END], limit: want + 1 })) {
        const k = key as Key[];
        if (l.cursor && n === 0 && k[1] === l.cursor[1] && k[2] === l.cursor[2]) continue;
        l.cursor = k;
        n++;
        l.seen++;
        if (l.keys) {
          if (l.keys.length < vectorLoading.listedKeys) l.keys.push(k as VectorKey);
          else l.keys = undefined;
        }
        if (l.sample.length < size) l.sample.push(k as VectorKey);
        else {
          const j = Math.floor(l.rand() * l.seen);
          if (j < size) l.sample[j] = k as VectorKey;
        }
        if (n === want) break;
      }
      if (n === want) return [ns];
      l.cursor = undefined;
      if (l.seen < Math.min(size, vectorLoading.meanFrom)) {
        l.phase = "all";
        l.sample = [];
      } else {
        l.phase = "sample";
        if (l.seen < size) {
          // The mean only (no cells yet): of a uniform sample (the reservoir holds every key).
          for (let i = 0; i < Math.min(vectorLoading.meanSample, l.sample.length); i++) {
            const j = i + Math.floor(l.rand() * (l.sample.length - i));
            [l.sample[i], l.sample[j]] = [l.sample[j], l.sample[i]];
          }
          l.sample.length = Math.min(vectorLoading.meanSample, l.sample.length);
        }
        // Read in key order (neighbouring pages).
        l.sample.sort((a, b) => (a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : a[2] < b[2] ? -1 : a[2] > b[2] ? 1 : 0));
      }
      return [ns];
    }
    if (l.phase === "sample") {
      for (const end = Math.min(l.sample.length, l.next + limit * 4); l.next < end; l.next++) {
        const [, entity, id] = l.sample[l.next];
        const v = readNow(ns, entity, id);
        if (!v) continue;
        l.sum ??= new Float64Array(v.length);
        if (v.length !== l.sum.length) continue;
        for (let j = 0; j < v.length; j++) l.sum[j] += v[j];
        l.summed++;
      }
      if (l.next < l.sample.length) return [ns];
      if (l.sum && l.summed > 0) {
        // The centres: sampled vectors in a deterministic random order.
        const order = l.sample.map((_, i) => i);
        for (let i = order.length - 1; i > 0; i--) {
          const j = Math.floor(l.rand() * (i + 1));
          [order[i], order[j]] = [order[j], order[i]];
        }
        const centres: Float32Array[] = [];
        for (const i of order) {
          if (centres.length >= ann.cells || l.seen < size) break;
          const [, entity, id] = l.sample[i];
          const v = read(ns, entity, id);
          if (v?.length === l.sum.length) centres.push(v);
        }
        s.prime(
          l.sum.map((x) => x / l.summed),
          centres,
          l.seen,
        );
      }
      l.phase = "all";
      l.sample = [];
      return [ns];
    }
    // The vector of each key listed (read in place: no copy each, as a range's values are); a
    // memory a commit touched during the load is read once, after it: not here too.
    if (l.keys) {
      const keys = l.keys;
      for (const end = Math.min(keys.length, l.at + limit); l.at < end; l.at++) {
        const [, entity, id] = keys[l.at];
        if (later?.(id)) continue;
        const v = readNow(ns, entity, id);
        if (v) s.set(id, entity, v);
      }
      if (l.at < keys.length) return [ns];
      loads.delete(s);
      return undefined;
    }
    // Else the keys walked again, likewise.
    const after = l.cursor;
    let n = 0;
    for (const key of dbs.vectors.getKeys({ start: after ?? [ns], end: [ns, END], limit: after ? limit + 1 : limit })) {
      const k = key as VectorKey;
      if (after && n === 0 && k[1] === after[1] && k[2] === after[2]) continue;
      l.cursor = k;
      n++;
      if (later?.(k[2])) continue;
      const v = readNow(ns, k[1], k[2]);
      if (v) s.set(k[2], k[1], v);
    }
    if (n < limit) {
      l.cursor = undefined;
      loads.delete(s);
    }
    return l.cursor;
  };
  const cache = new NamespaceCache<VectorSpace, Float32Array>(
    {
      empty: (ns) => {
        const keeper = new FourBit();
        const readVector = (id: string, entity: string) => bytes(ns, entity, id);
        const found = dataDir ? readVectorSnapshot(dataDir, ns, stamp()) : undefined;
        const thawed = found && VectorSpace.thaw(found.space, found.sections, readVector, keeper);
        const s = thawed ?? new VectorSpace(readVector, keeper);
        if (thawed) {
          snapshotStats.read++;
          thawedOnce.add(s);
          restored.set(s, { phase: "events", at: found!.at, rows: 0, oddSeen: new Set(), changes: 0 });
        }
        saves.set(s, { ns, changes: 0 });
        copies.set(ns, s);
        keepers.set(s, keeper);
        return s;
      },
      released: (s, ns) => {
        if (copies.get(ns) === s) copies.delete(ns);
        // (Released by the budget though nobody searched it: not followed again until searched.)
        if (!cache.searched(ns)) unfollowed.add(ns);
      },
      unloaded: (ns, changes) => {
        if (!following || unfollowed.has(ns)) return;
        // (Bounded: a server of many small tenants forgets the counts, and counts again.)
        if (noted.size >= 10_000 && !noted.has(ns)) noted.clear();
        const n = (noted.get(ns) ?? 0) + changes;
        noted.set(ns, n);
        // Counted at commit time: a bulk load is looked at once it may hold enough, not up to
        // followMs later (in process, 16,000 stores a second, the timer's look found 20,000-26,000
        // vectors: all loaded in the background, then those committed meanwhile read again). Not
        // again before an eighth of `from` more changes, so a namespace just below it whose
        // vectors are replaced (changes that do not add) is not counted at every commit.
        if (n >= Math.max(vectorSnapshots.from - (counted.get(ns) ?? 0), vectorSnapshots.from / 8)) lookSoon();
      },
      load: (s, ns, _after, limit, later) => load(s, ns, limit, later),
      // Read from the records: saved behind this search, so the next start reads it.
      loaded: (s) => {
        complete.add(s);
        const st = saves.get(s);
        if (!st) return;
        if (!thawedOnce.has(s)) st.changes = Number.POSITIVE_INFINITY;
        else st.changes = caughtUp.get(s) ?? 0;
        if (st.changes >= Math.max(vectorSnapshots.from, s.size * vectorSnapshots.again)) void save(s);
      },
      keep: (s) => s.size > 0,
      bytes: (s) => s.heldBytes(),
      // (Put or dropped before the next read: refreshTouched.)
      read: ([ns, entity, id]) => readNow(ns, entity, id),
      drop: (s, [, entity, id]) => {
        s.set(id, entity, undefined);
        changed(s);
      },
      put: (s, [, entity, id], v) => {
        s.set(id, entity, v);
        changed(s);
      },
    },
    memory,
    "vector",
  );
  /**
   * Following namespaces as they grow (`follow`, with a data dir: memd serve with
   * --keyword-prebuild): a namespace that commits vectors is counted (keys up to
   * `vectorSnapshots.from`) right after a commit whose noted changes could take it there, and by a
   * look every `followMs` (not again until its noted changes could take it there), and once it
   * holds that many its vectors are loaded in the background and kept in step, so that it is
   * saved (and saved again as it grows) without being searched: the first semantic search after a
   * bulk load, or after a restart that followed one, does not read every vector.
   */
  const following = follow && dataDir !== undefined;
  const noted = new Map<string, number>();
  const counted = new Map<string, number>();
  const unfollowed = new Set<string>();
  let looking = false;
  const look = () => {
    if (looking) return;
    looking = true;
    try {
      for (const [ns, n] of noted) {
        noted.delete(ns);
        if (cache.has(ns)) continue;
        if ((counted.get(ns) ?? 0) + n < vectorSnapshots.from) {
          counted.set(ns, (counted.get(ns) ?? 0) + n);
          continue;
        }
        let c = 0;
        for (const _ of dbs.vectors.getKeys({ start: [ns], end: [ns, END], limit: vectorSnapshots.from })) c++;
        if (c < vectorSnapshots.from) {
          if (counted.size >= 10_000) counted.clear();
          counted.set(ns, c);
          continue;
        }
        counted.delete(ns);
        Promise.resolve(cache.prefetch(ns)).catch(() => undefined);
      }
    } finally {
      looking = false;
    }
  };
  let soon = false;
  let stopped = false;
  const lookSoon = () => {
    if (soon || stopped) return;
    soon = true;
    setImmediate(() => {
      soon = false;
      // (Not after the store closed: its databases are closed too.)
      if (!stopped) look();
    });
  };
  const timer = following ? setInterval(look, vectorSnapshots.followMs) : undefined;
  timer?.unref?.();

  return Object.assign(cache, {
    snapshotStats,
    /** Stops following namespaces as they grow (the store closes). */
    stop() {
      stopped = true;
      if (timer) clearInterval(timer);
    },
    /** Saves every loaded copy changed since its last save (the store closes). */
    async save() {
      for (const [ns, s] of copies) if (cache.has(ns) && (saves.get(s)?.changes ?? 0) > 0) await save(s);
      await saving;
    },
    /** Forgets every namespace (after a rebuild: their copies are of the index before). */
    clear() {
      copies.clear();
      unfollowed.clear();
      NamespaceCache.prototype.clear.call(cache);
      // (What commits before it wrote is not handed to the copies loaded after it.)
      cache.passed(latestCommitOrder());
    },
    forget(ns: string) {
      const job = jobs.get(ns);
      if (job) {
        job.cancelled = true;
        rmSync(job.tmp, { force: true });
        jobs.delete(ns);
      }
      if (dataDir) dropVectorSnapshot(dataDir, ns);
      const s = copies.get(ns);
      if (s) keepers.get(s)?.own();
    },
  });
}
