// LMDB's keyword lists: one KeywordSpace (src/index/keyword/) per namespace searched. LMDB holds
// what it is built from: the namespace's current memories (namespace_memories, written in the
// apply transaction) and their records, whose content is tokenized here (format 6; format 5
// stored the terms, at 3-5 µs of a raw store's CPU, for namespaces never searched too). It is
// built on the namespace's first search (in slices: touched.ts) and kept in step by the storage
// after each committed write that changed it (it re-reads those memories from LMDB and indexes
// what is current, so it follows the committed state whatever order commits land in).
import { rmSync } from "node:fs";
import type { Key } from "lmdb";
import { KeywordSpace } from "../../index/keyword";
import type { EventRecord, MemoryRecord } from "../records";
import type { SearchMemory } from "../search-memory";
import {
  dropSnapshots,
  readSnapshot,
  type SnapshotJob,
  snapshotCovers,
  snapshotJob,
  writeSnapshot,
} from "./keyword-snapshot";
import { type Dbs, END } from "./layout";
import { loadSlice, NamespaceCache, settledAt, snapshotStamp } from "./touched";

/**
 * The in-memory postings of every namespace searched so far, each kept in step with the current
 * records of its memories (KeywordSpace.addText takes their terms).
 */
export type KeywordCache = NamespaceCache<KeywordSpace, MemoryRecord>;

/**
 * How many namespaces' lists were read from a snapshot in this process on a first search
 * (restored), how many times lists were replaced by the snapshot just written of them
 * (reloaded), collections run after a reload, and the lists replaced last (held weakly: they
 * must not stay reachable); for tests.
 */
export const snapshotStats = {
  restored: 0,
  reloaded: 0,
  collections: 0,
  replaced: undefined as WeakRef<KeywordSpace> | undefined,
};

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
  /**
   * Lists built from the records, of at least this many documents, are collected at once when
   * the snapshot just written of them takes their place (a full collection: 0.1-0.2 s at
   * 1,000,000, once per namespace and process; tests set 0). They are ~250 MB of the heap's
   * arrays at 1,000,000, and left to the collector's own pace they stayed in the process for 0-3
   * s or more after the swap, so a figure read then was 95 or 372 MiB (bench/notes.md, issue
   * 26). Lists read from a snapshot and replaced by a newer one hold little of the heap (their
   * tails and what outgrew the file's spare room): left to the collector.
   */
  collectAbove: 100_000,
};

/**
 * The garbage of the background look (startPrebuild) at one namespace: the keys it read, decoded,
 * to count its memories or events. Measured: RssAnon +18 MiB after a look over 10,000 namespaces
 * of 20 memories, kept until the collector's own pace took it (issue 32); counted as what a search
 * lets go (SearchMemory.transient), it is collected once the look is done.
 */
const LOOK_BYTES = 2048;

/**
 * Background snapshots (prebuild): how often the store is looked at for namespaces to snapshot
 * (first `startMs` after opening, then every `everyMs`, and soon after an import); tests shorten
 * both. The threshold is the `prebuild` option (settings: --keyword-prebuild).
 */
export const prebuilding = {
  startMs: 1_000,
  everyMs: 10_000,
  /**
   * More new events than this since the last look means the store is busy: the look (and any
   * build) waits for a look that finds it quieter, so a burst of stores does not pay for it
   * (the looks at start and after an import run whatever the load)...
   */
  busy: 10_000,
  /**
   * ...for at most this many looks in a row (a minute): a store that stays busy still gets its
   * snapshots, built in slices at low priority, so a kill -9 does not cost a full rebuild.
   */
  patience: 6,
  /** How often namespaces taking writes are looked at for following (keywordCache's startFollowing)... */
  followMs: 1_000,
  /**
   * ...and how many current memories one needs (or the prebuild threshold, if more): below it a
   * first search builds its lists in well under a second (~0.75 s at 50,000 on a quiet machine),
   * and stores into it do not pay for taking their terms.
   */
  followFrom: 50_000,
  /**
   * Whether a look saves a followed namespace whose save waits for its writes to pause (see
   * changed in keywordCache) when it took none since the look before; tests turn it off, and only
   * its growing fourfold (or the close) saves it then.
   */
  savePaused: true,
};

/**
 * How many background snapshots were written, and looks at the store finished (or found nothing
 * new since the last), in this process (for tests).
 */
export const prebuildStats = { written: 0, checks: 0 };

/** Namespaces whose lists were loaded to be followed as they grew, unsearched (startFollowing), in this process (for tests). */
export const followStats = { followed: 0 };

/** The keyword lists with what keywordCache adds: saves, snapshots ahead of a search, figures. */
export type LoadedKeywordCache = KeywordCache & {
  save(): Promise<void>;
  persist(ns: string): Promise<number>;
  counters(): Record<string, [string, number]>;
  forget(ns: string): void;
  wake(): void;
  stop(): void;
};

export type PrebuildLog = (msg: string, fields: Record<string, unknown>) => void;

/**
 * The keyword lists of every namespace searched so far. With `dataDir`, each is saved in a
 * snapshot beside the store (keyword-snapshot.ts) and read back, caught up, on its first search.
 * With `prebuild` (a count of current memories, > 0) too, a namespace of at least that many gets
 * its snapshot written in the background without being searched: see startPrebuild.
 */
export function keywordCache(
  dbs: Dbs,
  dataDir?: string,
  settledSeq: () => number = () => Number.POSITIVE_INFINITY,
  options: { prebuild?: number; log?: PrebuildLog; memory?: SearchMemory } = {},
): LoadedKeywordCache {
  /**
   * A memory's record if namespace_memories lists it under `namespace`: a memory is listed exactly
   * while its record is current (both written in one transaction), and never changes namespace,
   * so the record alone answers.
   */
  const recordOf = (namespace: string, id: string): MemoryRecord | undefined =>
    listed(namespace, dbs.memories.get(id) as MemoryRecord | undefined);
  const listed = (namespace: string, r: MemoryRecord | undefined): MemoryRecord | undefined =>
    r?.state === "current" && r.namespace === namespace ? r : undefined;
  const addRecord = (s: KeywordSpace, id: string, r: MemoryRecord, isNew = false) =>
    s.addText(id, r.content, r.createdAt, r.entity, isNew);
  const stamp = () => snapshotStamp(dbs);
  /**
   * Per loaded space: its namespace, changes since its last save began, whether a save is
   * queued, the save being written, and (restored) the time to catch up from.
   */
  type State = {
    ns: string;
    changes: number;
    queued: boolean;
    /**
     * A save due but waiting for the namespace's writes to pause (see changed): its changes at the
     * last look (startFollowing), -1 before the first.
     */
    waiting?: number;
    job?: SnapshotJob;
    from?: { atMs: number; atSeq: number };
    /** meta "clockEpoch" when it was read (see seen). */
    epoch: number;
  };
  const state = new Map<KeywordSpace, State>();
  /**
   * meta "clockEpoch", which `memd import` bumps, as of the lists loaded now: an import by another
   * process (the command, into a running server's data dir) is not followed by them, so a search
   * finding it changed drops them all and loads again (from the snapshot the import saved, or the
   * records), and lists read before it are never saved.
   */
  const epochNow = () => (dbs.meta.get("clockEpoch") as number | undefined) ?? 0;
  let seen = epochNow();
  /** Namespaces' lists read from a snapshot at a first load, and built from the records (/metrics). */
  const loads = { snapshot: 0, records: 0 };
  /** Spaces built from the records (not read from a snapshot): on the heap whole. */
  const built = new WeakSet<KeywordSpace>();
  /** Saves run one at a time, in the order queued. */
  let saving: Promise<void> = Promise.resolve();
  const save = async (s: KeywordSpace) => {
    const st = state.get(s);
    if (!st) return;
    st.queued = false;
    // (A small namespace's lists are packed, and built again from its records at a first search
    // in about the time a snapshot takes to read: not saved.)
    if (!dataDir || s.stats.docs === 0 || s.packed) return;
    // (Read before an import by another process, they may miss what it wrote: never saved.)
    if (epochNow() !== st.epoch) return;
    // Both in the same turn as the lists: every event up to the settled seq is committed and
    // followed by them (the commits queued are followed first); the load catches up from its time
    // on. What the snapshot holds is fixed here (freeze); the lists go on following commits while
    // it is written.
    cache.follow();
    const atSeq = settledSeq();
    const atMs = settledAt(dbs, st.ns, atSeq);
    const frozen = s.freeze();
    st.changes = 0;
    const job = snapshotJob(dataDir, st.ns);
    st.job = job;
    try {
      const written = await writeSnapshot(dataDir, st.ns, { ...stamp(), atMs, atSeq }, frozen, job, snapshotting);
      // The namespace is read again from the file just written (mapped, caught up), which then
      // takes the place of these lists: built from the records, or copied out of an older file
      // by the changes since, they are on the heap.
      // A namespace built in the background and not searched since is dropped instead: memory
      // stays as it is for unsearched namespaces; its first search reads the file.
      if (written && state.get(s) === st) {
        if (cache.searched(st.ns) || followed.has(st.ns)) cache.reload(st.ns);
        else evict(st.ns);
      }
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
    st.waiting = undefined;
    saving = saving.then(() => (state.get(s) === st ? save(s) : undefined)).catch(() => undefined);
  };
  /** Calls off a save being written: it is not renamed into place, and its temporary file is gone now. */
  const cancel = (st: State) => {
    if (!st.job) return;
    st.job.cancelled = true;
    rmSync(st.job.tmp, { force: true });
    st.job = undefined;
  };
  /** Whether the namespace is followed as it grows and nobody searched it yet (startFollowing). */
  const growing = (st: State) => followed.has(st.ns) && !cache.searched(st.ns);
  /**
   * A namespace's save is due after a tenth of its size in changes. One growing (a bulk load into
   * it) waits instead for its writes to pause for a look of startFollowing (about a second), after
   * its background build or half its size in changes, unless it grew fourfold since its last save
   * (changes three quarters of its size): saved while it took writes, a load of 100,000 paid for a
   * save, the read back and compiling the writer and the lists' code again (~0.5 s of CPU within
   * the load, issue 32); a load of 1,000,000 is saved at 200,000 and 800,000 as it grows (a kill
   * -9 then costs a catch-up from there), not at 50,000, 100,000, 200,000, 400,000 and 800,000.
   */
  const changed = (s: KeywordSpace) => {
    const st = state.get(s);
    if (!st) return;
    const docs = s.live;
    ++st.changes;
    if (!growing(st)) {
      if (st.changes >= Math.max(snapshotting.after, docs / 10)) queue(s);
    } else if (st.changes >= Math.max(snapshotting.after, docs * 0.75)) queue(s);
    else if (st.changes >= Math.max(snapshotting.after, docs / 2)) st.waiting ??= -1;
  };
  /**
   * Namespaces taking writes whose lists are kept loaded though nobody searched them (see
   * startFollowing), and per namespace not loaded: the changes noted since it was last counted
   * and how many current memories it had then.
   */
  const followed = new Set<string>();
  const unfollowed = new Set<string>();
  const noted = new Map<string, number>();
  const counted = new Map<string, number>();
  const cache = new NamespaceCache<KeywordSpace, MemoryRecord>(
    {
      empty: (ns, reload) => {
        // (A reload reads the file this process has just written: its hashes are not checked again.)
        const found = dataDir ? readSnapshot(dataDir, ns, stamp(), !reload) : undefined;
        if (reload && !found) return undefined;
        if (found && reload) snapshotStats.reloaded++;
        else if (found) {
          snapshotStats.restored++;
          loads.snapshot++;
        } else loads.records++;
        // (Built from the records: packed while small, see KeywordSpace.)
        const s = found ? KeywordSpace.fromParts(found.parts) : new KeywordSpace(undefined, true);
        if (!found) built.add(s);
        state.set(s, { ns, changes: 0, queued: false, from: found?.at, epoch: epochNow() });
        return s;
      },
      load: (s, ns, after, limit, later) => {
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
            const r = recordOf(ns, id);
            if (r) addRecord(s, id, r);
            else s.remove(id);
          }
          st.changes = ids.size;
          return undefined;
        }
        return loadSlice(dbs.namespaceMemories, ns, after, limit, (key) => {
          if (later?.(key[1] as string)) return;
          const r = recordOf(ns, key[1] as string);
          if (r) addRecord(s, key[1] as string, r, true);
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
          else if (st && growing(st)) st.waiting ??= -1;
          else if (st) queue(s);
        } else st.from = undefined;
      },
      replaced: (old) => {
        const st = state.get(old);
        if (st) cancel(st);
        state.delete(old);
        snapshotStats.replaced = new WeakRef(old);
        // The old lists are garbage once the save that read the new ones back has returned (it
        // holds them until then): collected on the next turn, and the process gives their memory
        // back instead of holding it until its heap grows again.
        if (built.has(old) && old.count >= snapshotting.collectAbove)
          setImmediate(() => {
            snapshotStats.collections++;
            Bun.gc(true);
          });
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
      read: ([ns, , id]) => recordOf(ns, id),
      // (The record a commit just created: not read back from LMDB. See NamespaceCache.refresh.)
      created: ([ns], r) => listed(ns, r),
      drop: (s, [, , id]) => {
        s.remove(id);
        changed(s);
      },
      put: (s, [, , id], r) => {
        addRecord(s, id, r);
        changed(s);
      },
      bytes: (s) => s.heldBytes(),
      released: (s, ns) => {
        // The budget let it go: a save under way is called off (the next load catches up from the
        // snapshot before it), and it is no longer followed (nor followed again unless searched:
        // it would take the place of searched ones).
        const st = state.get(s);
        if (st) cancel(st);
        state.delete(s);
        if (followed.delete(ns)) unfollowed.add(ns);
      },
      unloaded: (ns, changes) => {
        if (following) noted.set(ns, (noted.get(ns) ?? 0) + changes);
      },
    },
    options.memory,
    "keyword",
    true,
  );
  /** Drops a namespace's loaded lists (not searched: see save). */
  const evict = (ns: string) => {
    followed.delete(ns);
    const s = cache.evict(ns);
    const st = s && state.get(s);
    if (st) cancel(st);
    if (s) state.delete(s);
  };
  const following = dataDir !== undefined && (options.prebuild ?? 0) > 0;
  const follow = startFollowing();
  const prebuild = startPrebuild();
  /**
   * No cold first search after a bulk load (issue 32): a namespace not loaded that takes writes
   * and reaches prebuilding.followFrom current memories (or `prebuild`) while doing so has its lists
   * loaded in the background (NamespaceCache.prefetch: from its snapshot, caught up, or its
   * records, in slices at low priority) within `prebuilding.followMs`, and then kept and followed
   * like a searched one, so that its first search finds them: the terms of what a bulk load
   * stores are taken as it stores them instead of all at that search. Counting is cheap: the
   * changes every commit makes per namespace are noted (refresh), and a namespace is counted
   * (its current memories, up to the threshold) only once those could have taken it there.
   * Such lists count in the search-memory budget like any (never searched: released first).
   */
  function startFollowing() {
    const threshold = Math.max(options.prebuild ?? 0, prebuilding.followFrom);
    if (!following) return { stop() {} };
    let busy = false;
    const look = async () => {
      // Saves waiting for their namespace's writes to pause (changed): none since the last look.
      for (const [s, st] of state)
        if (st.waiting !== undefined) {
          if (st.waiting !== st.changes) st.waiting = st.changes;
          else if (prebuilding.savePaused) queue(s);
        }
      if (busy || noted.size === 0) return;
      busy = true;
      try {
        const names = [...noted];
        noted.clear();
        for (const [ns, changes] of names) {
          if (cache.has(ns) || (unfollowed.has(ns) && !cache.searched(ns))) continue;
          const before = counted.get(ns);
          if (before !== undefined && before + changes < threshold) {
            counted.set(ns, before + changes);
            continue;
          }
          let n = 0;
          for (const _ of dbs.namespaceMemories.getKeys({ start: [ns], end: [ns, END], limit: threshold })) n++;
          if (n < threshold) {
            // (Bounded: a server of many small tenants forgets the counts, and counts again.)
            if (counted.size >= 10_000) counted.clear();
            counted.set(ns, n);
            continue;
          }
          counted.delete(ns);
          followed.add(ns);
          options.log?.("keyword lists: followed as the namespace grows", { namespace: ns, memories: n });
          await cache.prefetch(ns);
          followStats.followed++;
        }
      } catch (e) {
        options.log?.("keyword lists: following failed", { error: (e as Error).message });
      } finally {
        busy = false;
      }
    };
    const every = setInterval(() => void look(), prebuilding.followMs);
    every.unref?.();
    return {
      stop() {
        clearInterval(every);
        noted.clear();
      },
    };
  }
  /**
   * Background snapshots. A timer looks at the events' count (one figure LMDB keeps); when it
   * moved (or at start, or after an import), each namespace not loaded whose newest event or the
   * epochs changed since the last look is checked: without a usable snapshot, are there at least
   * `threshold` current memories (counted up to that many); with one, have its events since the
   * snapshot reached a tenth of it (at least min(snapshotting.after, threshold))? (Not while the
   * store is busy, up to a minute: see prebuilding.busy.) If so its lists
   * are loaded in the background (NamespaceCache.prefetch: slices at low priority, joined by a
   * search), saved as usual, and dropped again unless a search asked for them meanwhile. One
   * namespace at a time. Nothing of this runs on the store path.
   */
  function startPrebuild() {
    const threshold = options.prebuild ?? 0;
    if (!dataDir || threshold <= 0) return { wake() {}, stop() {} };
    const dir = dataDir;
    let closed = false;
    let running = false;
    let again = false;
    let lastEvents = -1;
    let pending = false;
    /** Busy looks in a row (prebuilding.patience). */
    let waited = 0;
    const looked = new Map<string, string>();
    const firstKey = (db: typeof dbs.namespaceMemories, start: Key[] | undefined) => {
      for (const key of db.getKeys({ start, limit: 1 })) if (Array.isArray(key)) return key as Key[];
      return undefined;
    };
    const newest = (ns: string) => {
      for (const key of dbs.eventsByNs.getKeys({ start: [ns, END], end: [ns], reverse: true, limit: 1 }))
        return JSON.stringify(key);
      return "";
    };
    const count = (db: typeof dbs.namespaceMemories, start: Key[], end: Key[], limit: number) => {
      let n = 0;
      for (const _ of db.getKeys({ start, end, limit })) n++;
      return n;
    };
    /** Why the namespace needs a snapshot now, or undefined. */
    const due = (ns: string): string | undefined => {
      const has = snapshotCovers(dir, ns, stamp());
      if (!has)
        return count(dbs.namespaceMemories, [ns], [ns, END], threshold) >= threshold ? "no snapshot" : undefined;
      const enough = Math.max(Math.min(snapshotting.after, threshold), Math.ceil(has.count / 10));
      const since = count(dbs.eventsByNs, [ns, has.at.atMs, has.at.atSeq + 1], [ns, END], enough);
      return since >= enough ? "snapshot behind" : undefined;
    };
    const build = async (ns: string, reason: string) => {
      const t0 = performance.now();
      options.log?.("keyword snapshot: building in the background", { namespace: ns, reason });
      let s: KeywordSpace | undefined = await cache.prefetch(ns);
      if (closed) return;
      const st = state.get(s);
      const docs = s.stats.docs;
      // (Built from the records: loaded() queued its save; restored and caught up: saved here.)
      if (st && st.from === undefined && docs > 0) queue(s);
      s = undefined; // (not held here while collected below)
      await saving;
      if (closed) return;
      if (!cache.searched(ns) && !followed.has(ns)) {
        evict(ns);
        // The dropped lists were hundreds of MB at 1,000,000 memories: collected now, so the
        // process gives them back instead of keeping them until its heap grows again.
        Bun.gc(true);
      }
      const done = snapshotCovers(dir, ns, stamp());
      if (done) prebuildStats.written++;
      options.log?.(done ? "keyword snapshot: written in the background" : "keyword snapshot: not written", {
        namespace: ns,
        memories: done?.count ?? docs,
        ms: Math.round(performance.now() - t0),
      });
    };
    const check = async (force: boolean) => {
      if (closed) return;
      if (running) {
        again ||= force;
        return;
      }
      const events = (dbs.events.getStats() as { entryCount: number }).entryCount;
      if (!force && events === lastEvents && !pending) {
        prebuildStats.checks++;
        return;
      }
      if (!force && lastEvents >= 0 && events - lastEvents > prebuilding.busy && waited < prebuilding.patience) {
        lastEvents = events;
        pending = true;
        waited++;
        prebuildStats.checks++;
        return;
      }
      pending = false;
      waited = 0;
      running = true;
      try {
        lastEvents = events;
        const st = stamp();
        const epoch = `${st.format}/${st.clockEpoch}/${st.searchEpoch}:`;
        for (let key = firstKey(dbs.namespaceMemories, undefined); key !== undefined && !closed; ) {
          const ns = key[0] as string;
          const mark = epoch + newest(ns);
          if (!cache.has(ns) && looked.get(ns) !== mark) {
            looked.set(ns, mark);
            // (What the look read and dropped: towards the next collection, see LOOK_BYTES.)
            options.memory?.transient(LOOK_BYTES);
            const reason = due(ns);
            if (reason) await build(ns, reason);
          }
          if (closed) break;
          key = firstKey(dbs.namespaceMemories, [ns, END]);
        }
      } catch (e) {
        if (!closed) options.log?.("keyword snapshot: background build failed", { error: (e as Error).message });
      } finally {
        running = false;
        prebuildStats.checks++;
      }
      if (again && !closed) {
        again = false;
        void check(true);
      }
    };
    const first = setTimeout(() => void check(true), prebuilding.startMs);
    const every = setInterval(() => void check(false), prebuilding.everyMs);
    first.unref?.();
    every.unref?.();
    return {
      /** Looks again soon, whatever the events' count (after an import). */
      wake() {
        if (!closed) setTimeout(() => void check(true), 0).unref?.();
      },
      stop() {
        closed = true;
        clearTimeout(first);
        clearInterval(every);
      },
    };
  }
  const clear = cache.clear.bind(cache);
  const get = cache.get.bind(cache);
  return Object.assign(cache, {
    get(ns: string) {
      const now = epochNow();
      if (now !== seen) {
        seen = now;
        this.clear();
      }
      return get(ns);
    },
    wake: () => prebuild.wake(),
    /** Stops background snapshots (at close, before the saves are awaited). */
    stop: () => {
      prebuild.stop();
      follow.stop();
    },
    clear() {
      for (const st of state.values()) cancel(st);
      state.clear();
      followed.clear();
      clear();
    },
    /** Saves every loaded namespace changed since its last save began, after the saves under way (at close). */
    async save() {
      for (const [s, st] of state)
        if ((st.changes !== 0 || st.waiting !== undefined) && st.from === undefined) queue(s);
      await saving;
    },
    counters: (): Record<string, [string, number]> => ({
      memd_keyword_lists_restored_total: [
        "Namespaces whose keyword lists were read from their snapshot (caught up) when loaded: a first search after a restart or an import, or brought back after a release.",
        loads.snapshot,
      ],
      memd_keyword_lists_built_total: [
        "Namespaces whose keyword lists were built from their memories' records when loaded (no usable snapshot).",
        loads.records,
      ],
    }),
    /**
     * Builds a namespace's lists now (from its snapshot, caught up, or its records) and saves them
     * (after an import: `memd import` leaves every large namespace it wrote with a snapshot, so the
     * first search of a server reads it instead of building); resolves with its documents.
     */
    async persist(ns: string): Promise<number> {
      const s = await cache.get(ns);
      const docs = s.stats.docs;
      const st = state.get(s);
      if (st && docs > 0) {
        st.changes = Math.max(st.changes, 1);
        queue(s);
      }
      await saving;
      // (The importing process holds none of them afterwards.)
      evict(ns);
      return docs;
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
