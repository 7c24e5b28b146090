import type { Database, Key } from "lmdb";
import type { MemoryRecord } from "../records";
import { ENTRY_BYTES, type SearchMemory } from "../search-memory";
import { type Dbs, END } from "./layout";

/** A memory's key in a namespace-scoped index: [namespace, entity, memoryId]. */
export type Touched = readonly [string, string, string];

/**
 * Brings an in-memory copy of an index up to date with what a committed write touched: per
 * memory, `read` each touched key from LMDB (an entity change touches two; `alone`: the memory's
 * only key in `touched`); where it is found now, `put` it; in every other loaded namespace it was
 * touched in, `drop` it. Namespaces not loaded (`loaded` false) are left alone: they are read
 * whole on first use.
 */
export function refreshTouched<V>(
  touched: readonly Touched[],
  loaded: (namespace: string) => boolean,
  read: (key: Touched, alone: boolean) => V | undefined,
  drop: (key: Touched) => void,
  put: (key: Touched, value: V) => void,
) {
  // (A memory's keys, most often one: no array for it.)
  const byId = new Map<string, Touched | Touched[]>();
  for (const t of touched) {
    if (!loaded(t[0])) continue;
    const had = byId.get(t[2]);
    if (had === undefined) byId.set(t[2], t);
    else if (typeof had[0] === "string") byId.set(t[2], [had as Touched, t]);
    else (had as Touched[]).push(t);
  }
  for (const one of byId.values()) {
    const ks = typeof one[0] === "string" ? [one as Touched] : (one as Touched[]);
    let found: [Touched, V] | undefined;
    for (const k of ks) {
      const v = read(k, ks.length === 1);
      if (v !== undefined) found = [k, v];
    }
    for (const k of ks) if (found?.[0][0] !== k[0]) drop(k);
    if (found) put(found[0], found[1]);
  }
}

/**
 * What one commit wrote to an index, by memory id: the key and the value it left there
 * (undefined: removed), or null when it wrote more than one key of that memory (read from LMDB).
 */
export type Written<V> = ReadonlyMap<string, readonly [Touched, V | undefined] | null>;

/** How one index is copied into memory per namespace (see NamespaceCache). */
export interface CacheSource<S, V> {
  /** A new copy to load into; for a reload (see NamespaceCache.reload), undefined calls it off. */
  empty(namespace: string, reload?: boolean): S | undefined;
  /**
   * Reads up to `limit` entries of `namespace` from LMDB into `s`, starting after the key
   * `after` (from the start when undefined); returns the last key read, or undefined when the
   * namespace had no more. Entries of a memory for which `later` is true may be left out: a
   * write committed during the load touched it, and it is read again once the load ends.
   */
  load(
    s: S,
    namespace: string,
    after: Key[] | undefined,
    limit: number,
    later?: (id: string) => boolean,
  ): Key[] | undefined;
  /** After a first load (spare room can be dropped). */
  loaded?(s: S): void;
  /** After a reload: `now` took the place of `old`, which is no longer followed. */
  replaced?(old: S, now: S): void;
  /** Whether a loaded copy is worth keeping (an empty one is not: searches of unused names would pile up). */
  keep(s: S): boolean;
  /** What a loaded copy holds in memory (bytes, an estimate: see SearchMemory). */
  bytes(s: S): number;
  /** After the copy was released to stay within the search-memory budget (it follows nothing any more). */
  released?(s: S, namespace: string): void;
  /** A commit changed `changes` entries of a namespace neither loaded nor loading. */
  unloaded?(namespace: string, changes: number): void;
  /** A touched memory's entry as LMDB now holds it. */
  read(key: Touched): V | undefined;
  /** A touched memory's entry from the record its commit created (see NamespaceCache.refresh). */
  created?(key: Touched, record: MemoryRecord): V | undefined;
  drop(s: S, key: Touched): void;
  put(s: S, key: Touched, value: V): void;
}

/**
 * Entries read per slice of a first load, and what runs between slices: by default one turn of
 * the event loop, so other requests are served (tests make it wait for their writes).
 */
export const loading = {
  slice: 1000,
  between: (): Promise<unknown> => new Promise((resolve) => setImmediate(resolve)),
  /** Entries per slice of a background load (nobody waits for it): smaller, so a request waits less. */
  backgroundSlice: 250,
  /** Between slices of a background load: a timer, so requests go first. */
  background: (): Promise<unknown> => new Promise((resolve) => setTimeout(resolve, 1)),
};

/**
 * A cache made with `deferred` (the keyword lists) follows commits in batches: what a commit
 * touched is queued, and read into the copies once `batch` keys are queued, `ms` after the first,
 * or at once when anything reads the copies (a search, a save, a release): never stale. Read
 * together, a batch's records, words and lists stay in the processor's caches; one at a time,
 * between the store path's own work, following a bulk load cost ~3x the CPU (issue 32). The
 * window is short since the records come from the commits (refresh's `created`): followed a few
 * ms after their store they are still in the caches; 20 ms cost ~4-7% more CPU a store
 * (bench/notes.md, issue 32 third stop).
 */
export const deferring = { batch: 4096, ms: 3 };

/**
 * A load under way: the keys commits touched meanwhile (read into the copy once it has loaded),
 * and (not deferred) what those commits wrote, by id, where it may be used (see refresh).
 */
type LoadEntry<S, V> = {
  done: Promise<S>;
  touched: Touched[];
  ids: Set<string>;
  written: Map<string, readonly [Touched, V | undefined]>;
  background: boolean;
};

/**
 * In-memory copies of an index, per namespace: loaded from LMDB on first use, in slices so that a
 * large namespace does not hold up every other request while it loads (concurrent first uses
 * share one load), and kept in step with every committed write (refresh). Writes that commit
 * while a namespace loads are re-read once it has loaded, so the copy ends exact whatever the
 * slices saw.
 */
export class NamespaceCache<S, V> {
  private readonly ready = new Map<string, S>();
  private readonly loads = new Map<string, LoadEntry<S, V>>();
  /** Namespaces asked for by get (searched), as opposed to loaded in the background only. */
  private readonly wanted = new Set<string>();
  private generation = 0;
  /** Commits' touched keys not yet followed (`deferred`: see deferring), and the timer that will. */
  private queued: Touched[] = [];
  private timer: ReturnType<typeof setTimeout> | undefined;
  /**
   * Deferred: the records that the commits queued created, by id, each with its commit's order
   * (see refresh); the highest order queued; and the highest order of any commit followed before.
   */
  private handed = new Map<string, [MemoryRecord, number]>();
  private queuedOrder = 0;
  private followedOrder = 0;
  /**
   * `memory`: the budget every loaded copy is counted in, as `kind`; a search (get) makes its
   * namespace the most recent, and the least recently searched are released when over it.
   * `deferred`: commits are followed in batches (see deferring).
   */
  constructor(
    private readonly source: CacheSource<S, V>,
    private readonly memory?: SearchMemory,
    private readonly kind = "",
    private readonly deferred = false,
  ) {}

  /** The namespace's copy; a promise while it loads (a background load under way is joined and sped up). */
  get(namespace: string): S | Promise<S> {
    this.follow();
    this.wanted.add(namespace);
    this.memory?.searched(namespace);
    const s = this.ready.get(namespace);
    if (s) return s;
    const running = this.loads.get(namespace);
    if (running) {
      running.background = false;
      return running.done;
    }
    return this.start(namespace, false);
  }

  /**
   * Loads the namespace in the background (slices at low priority) without marking it searched;
   * a get arriving meanwhile joins this load.
   */
  prefetch(namespace: string): S | Promise<S> {
    return this.ready.get(namespace) ?? this.loads.get(namespace)?.done ?? this.start(namespace, true);
  }

  private start(namespace: string, background: boolean): Promise<S> {
    // In the map before the first slice runs: a namespace that loads at once removes it again.
    const entry: LoadEntry<S, V> = {
      touched: [],
      ids: new Set(),
      written: new Map(),
      done: undefined as never,
      background,
    };
    this.loads.set(namespace, entry);
    entry.done = this.load(namespace, entry);
    return entry.done;
  }

  /** Whether the namespace is loaded or loading. */
  has(namespace: string): boolean {
    return this.ready.has(namespace) || this.loads.has(namespace);
  }

  /** Whether a search asked for the namespace (get) since the cache was last cleared. */
  searched(namespace: string): boolean {
    return this.wanted.has(namespace);
  }

  /** Forgets a loaded namespace's copy (it no longer follows writes); the next get loads it again. */
  evict(namespace: string): S | undefined {
    const s = this.ready.get(namespace);
    this.ready.delete(namespace);
    this.memory?.drop(namespace, this.kind);
    return s;
  }

  /** Counts a loaded copy in the budget (again, when it may have grown), which may release others. */
  private held(namespace: string, s: S) {
    this.memory?.hold(
      namespace,
      this.kind,
      this.source.bytes(s) + ENTRY_BYTES,
      () => {
        if (this.ready.get(namespace) !== s) return;
        this.ready.delete(namespace);
        this.wanted.delete(namespace);
        this.source.released?.(s, namespace);
      },
      this.wanted.has(namespace),
    );
  }

  /**
   * Loads a loaded namespace's copy again (source.empty(namespace, true) makes the new one); the
   * old copy answers and follows writes until the new one has loaded and takes its place.
   */
  reload(namespace: string) {
    const old = this.ready.get(namespace);
    if (!old || this.loads.has(namespace)) return;
    const entry: LoadEntry<S, V> = {
      touched: [],
      ids: new Set(),
      written: new Map(),
      done: undefined as never,
      background: false,
    };
    this.loads.set(namespace, entry);
    entry.done = this.load(namespace, entry, old);
  }

  private async load(namespace: string, entry: LoadEntry<S, V>, old?: S): Promise<S> {
    const touched = entry.touched;
    const generation = this.generation;
    const s = this.source.empty(namespace, old !== undefined);
    if (s === undefined) {
      this.loads.delete(namespace);
      return old as S;
    }
    try {
      const slice = () => (entry.background ? loading.backgroundSlice : loading.slice);
      // (What writes touch meanwhile is read once, at the end: the slices may leave it out.)
      const later = (id: string) => entry.ids.has(id);
      for (let after = this.source.load(s, namespace, undefined, slice(), later); after !== undefined; ) {
        await (entry.background ? loading.background() : loading.between());
        // A background load stops once the cache is cleared (a rebuild, or the store closing).
        if (entry.background && generation !== this.generation) throw new Error("background load called off");
        after = this.source.load(s, namespace, after, slice(), later);
      }
      this.apply(touched, (ns) => (ns === namespace ? s : undefined), undefined, entry.written);
      this.source.loaded?.(s);
      if (generation === this.generation && this.source.keep(s)) {
        if (!old || this.ready.get(namespace) === old) {
          this.ready.set(namespace, s);
          if (old && old !== s) this.source.replaced?.(old, s);
          this.held(namespace, s);
          // (A reload whose old copy was released meanwhile is let go too.)
        } else this.source.released?.(s, namespace);
      }
      return s;
    } finally {
      if (this.loads.get(namespace)?.touched === touched) this.loads.delete(namespace);
    }
  }

  /**
   * After a committed write: follows what it touched in every loaded (or loading) namespace
   * (deferred: soon). `order`: the commit's place among all commits (IndexWriter.order: writers
   * are made inside LMDB's transaction callbacks, which run one at a time in commit order);
   * `created`: the current records it created (new ids), read from here instead of from LMDB;
   * `written` (a cache not deferred: the vectors): what it wrote, likewise.
   *
   * Why a created record is still what LMDB holds when it is followed, or else read: a later
   * commit that changed the memory was planned after this one committed (it read the memory),
   * so its order is higher. The record is used only when the memory has no other key in the
   * batch being followed (else: read) and no commit of a higher order was followed in an earlier
   * batch (else: read). A later commit not yet handed here is not yet acknowledged either (its
   * refresh runs before its answer), and reads LMDB when it is followed. What a commit wrote is
   * used by the same rule (no commit of a higher order followed before it), per key: a key
   * written last by this commit holds that value until a later commit changes it. Commits made
   * elsewhere (the embedding thread's) are followed with the order of the newest writer made
   * here when they are (IndexWriter.made): every commit of this thread that may have come before
   * theirs reads LMDB when it is followed.
   */
  refresh(
    touched: readonly Touched[],
    order = Number.POSITIVE_INFINITY,
    created?: ReadonlyMap<string, MemoryRecord>,
    written?: Written<V>,
  ) {
    if (touched.length === 0) return;
    if (!this.deferred) {
      // (Not deferred: what the commit wrote is used as created records are, by the same rule.)
      const before = this.followedOrder;
      if (order > before) this.followedOrder = order;
      return this.refreshNow(touched, undefined, order > before ? written : undefined);
    }
    for (const t of touched) this.queued.push(t);
    if (order > this.queuedOrder) this.queuedOrder = order;
    if (created) for (const [id, r] of created) this.handed.set(id, [r, order]);
    if (this.queued.length >= deferring.batch) this.follow();
    else if (this.timer === undefined) {
      this.timer = setTimeout(() => this.follow(), deferring.ms);
      this.timer.unref?.();
    }
  }

  /** Follows every commit queued so far (deferred); before anything reads the copies. */
  follow() {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    if (this.queued.length === 0) return;
    const touched = this.queued;
    const handed = this.handed;
    const order = this.queuedOrder;
    this.queued = [];
    if (handed.size > 0) this.handed = new Map();
    this.queuedOrder = 0;
    try {
      this.refreshNow(touched, handed);
    } finally {
      if (order > this.followedOrder) this.followedOrder = order;
    }
  }

  private refreshNow(touched: readonly Touched[], handed?: Map<string, [MemoryRecord, number]>, written?: Written<V>) {
    if (this.source.unloaded)
      for (let i = 0; i < touched.length; ) {
        const ns = touched[i][0];
        let j = i + 1;
        while (j < touched.length && touched[j][0] === ns) j++;
        if (!this.ready.has(ns) && !this.loads.has(ns)) this.source.unloaded(ns, j - i);
        i = j;
      }
    if (this.loads.size > 0)
      for (const t of touched) {
        const entry = this.loads.get(t[0]);
        if (!entry) continue;
        entry.touched.push(t);
        entry.ids.add(t[2]);
        // (The last commit followed that touched the memory decides: what it wrote, or a read.)
        const w = written?.get(t[2]);
        if (w && w[0][0] === t[0] && w[0][1] === t[1]) entry.written.set(t[2], w);
        else if (!this.deferred) entry.written.delete(t[2]);
      }
    if (this.ready.size === 0) return;
    this.apply(touched, (ns) => this.ready.get(ns), handed, written);
    if (!this.memory) return;
    // What the copies hold now (a commit's memories are of one namespace or a few).
    let last: string | undefined;
    for (const t of touched)
      if (t[0] !== last) {
        last = t[0];
        const s = this.ready.get(last);
        if (s) this.held(last, s);
      }
  }

  private apply(
    touched: readonly Touched[],
    spaceOf: (namespace: string) => S | undefined,
    handed?: Map<string, [MemoryRecord, number]>,
    written?: Written<V>,
  ) {
    const created = this.source.created && handed?.size ? this.source.created.bind(this.source) : undefined;
    const before = this.followedOrder;
    refreshTouched(
      touched,
      (ns) => spaceOf(ns) !== undefined,
      (k, alone) => {
        const w = written?.get(k[2]);
        if (w && w[0][0] === k[0] && w[0][1] === k[1]) return w[1];
        // (See refresh: a created record, unless a later commit may have changed the memory.)
        const h = created && alone ? handed!.get(k[2]) : undefined;
        return h && h[1] > before ? created!(k, h[0]) : this.source.read(k);
      },
      (k) => this.source.drop(spaceOf(k[0])!, k),
      (k, v) => this.source.put(spaceOf(k[0])!, k, v),
    );
  }

  /**
   * Commits of this order or lower read LMDB when followed from now on (see refresh): after a
   * change no writer of theirs followed (a rebuild).
   */
  passed(order: number) {
    if (order > this.followedOrder) this.followedOrder = order;
  }

  /** Forgets every namespace (after a rebuild); loads under way are not kept. */
  clear() {
    this.follow();
    for (const ns of this.ready.keys()) this.memory?.drop(ns, this.kind);
    this.generation++;
    this.ready.clear();
    this.wanted.clear();
    this.loads.clear();
  }
}

/**
 * Reads up to `limit` entries of `namespace` in `db` (keys [namespace, ...]) after the key
 * `after` (or from the start): CacheSource.load's walk over one LMDB range. Returns the last key
 * read, or undefined when none was left.
 */
export function loadSlice(
  db: Database,
  namespace: string,
  after: Key[] | undefined,
  limit: number,
  add: (key: Key[], value: unknown) => void,
): Key[] | undefined {
  let last: Key[] | undefined;
  let n = 0;
  // The range starts at `after` itself (inclusive): one more, and skip it.
  const range = db.getRange({ start: after ?? [namespace], end: [namespace, END], limit: after ? limit + 1 : limit });
  for (const { key, value } of range) {
    const k = key as Key[];
    if (after && n === 0 && k.length === after.length && k.every((x, i) => x === after[i])) continue;
    add(k, value);
    last = k;
    n++;
  }
  return n < limit ? undefined : last;
}

/** What a snapshot file of this data dir must match to be read: its format and epochs now. */
export const snapshotStamp = (dbs: Dbs) => ({
  format: (dbs.meta.get("format") as number | undefined) ?? 0,
  clockEpoch: (dbs.meta.get("clockEpoch") as number | undefined) ?? 0,
  searchEpoch: (dbs.meta.get("searchEpoch") as number | undefined) ?? 0,
});

/**
 * The time of the namespace's newest event whose seq is at most `seq` (0 if none). Per
 * namespace, times and seqs grow together (both are handed out in commit order), so every
 * event of a later seq is at that time or after.
 */
export function settledAt(dbs: Dbs, ns: string, seq: number): number {
  for (const key of dbs.eventsByNs.getKeys({ start: [ns, END], end: [ns], reverse: true }))
    if ((key as [string, number, number])[2] <= seq) return (key as [string, number, number])[1];
  return 0;
}
