// The search-memory budget (issue 32): what the in-memory search structures of every namespace
// (keyword lists, vector codes and their 4-bit copies; both backends) may hold together. Each
// owner tells what it holds per namespace and how to let it go; a search marks its namespace as
// the most recent. Once over the budget, the least recently searched namespaces are released,
// all their structures at once, until it fits again, but never the namespace searched last (a
// namespace larger than the budget alone is still served from memory). A released namespace is
// brought back on its next search as on a first one (LMDB: from its snapshot, caught up, or its
// records; PostgreSQL: built again while SQL answers): nothing of an answer depends on whether
// it was held.

/**
 * What a copy held for a namespace costs beside the copy's own heldBytes(), counted by its owner
 * with it: its entries in the owner's maps, its follower's state (PostgreSQL), this budget's map
 * and the closure that releases it. Measured (heap after a full collection, freed by releasing
 * thousands of namespaces of 20 memories): ~0.9 KiB each on LMDB, ~1 KiB on PostgreSQL (issue
 * 32: PostgreSQL counted none, 4.2 KiB for namespaces that held 5.0 KiB each).
 */
export const ENTRY_BYTES = 1024;

/**
 * Released bytes after which the process collects its garbage (a full collection, on the next
 * turn): a fraction of the budget, at least `COLLECT_MIN`. Where the budget binds, every release
 * is followed by a rebuild at the namespace's next search; left to the collector's own pace, the
 * released structures and the rebuilds' garbage grew the process by about as much again as the
 * budget held (issue 32: PostgreSQL, 15,000 namespaces of 20, 193 MiB against a base of 90 + 64).
 */
export const COLLECT_FRACTION = 1 / 16;
export const COLLECT_MIN = 4 * 2 ** 20;

/**
 * Once nothing was held, released or let go for `ms` (and the process was quiet: busyShare), a
 * full collection if at least `min` bytes were let go since the last (fewer than COLLECT_FRACTION
 * asks for): the garbage of the last burst of builds and searches is not left in the process
 * until the next burst (issue 32: PostgreSQL, 10,000 namespaces of 20 each built after a restart,
 * RssAnon 142 MiB, 129 after a collection, against 99 for one namespace of the same memories read
 * from its snapshot). Tests make it short.
 */
export const idleCollect = {
  ms: 500,
  min: 2 ** 20,
  shrinkEvery: 30_000,
  /**
   * Quiet also means the process used less than this share of a core over those `ms`: stores at
   * full speed with a search now and then count nothing here, and a full collection (and the
   * compiled code thrown away) amid them cost 1.12-1.30x their CPU a store (PostgreSQL, hrev).
   */
  busyShare: 0.25,
  /** The process's CPU time so far (ms, every thread). */
  cpuMs: () => {
    const u = process.cpuUsage();
    return (u.user + u.system) / 1000;
  },
};

const fullCollection = () => Bun.gc(true);
/**
 * The idle collection: a full one, the compiled code thrown away (compiled again as it runs) and
 * the allocators' free pages given back (JavaScriptCore's shrinkFootprintWhenIdle, through
 * Bun.shrink; a full collection alone where it is gone). Measured (issue 32, PostgreSQL, 10,000
 * namespaces of 20 built after a restart): RssAnon 125 MiB after a full collection, 104 after this.
 * At most once every `idleCollect.shrinkEvery` ms (a full collection alone between): the code
 * compiled again costs CPU, and bursts of searches a second apart would pay it at each.
 */
const shrink = () => {
  const b = Bun as unknown as { shrink?: () => void };
  if (typeof b.shrink === "function") b.shrink();
  else fullCollection();
};

/**
 * One structure of a namespace held in memory: its kind, size and how to let it go (called with
 * the namespace), and the namespace's next structure. A namespace's structures are a chain of
 * these, changed in place by hold (issue 32: a Map per namespace, and a new record and closure at
 * each search, were most of what the budget's bookkeeping cost 10,000s of small namespaces).
 */
type Held = { kind: string; bytes: number; release: (namespace: string) => void; next: Held | undefined };

export class SearchMemory {
  /** Namespaces holding something (their first structure), least recently searched first (a Map keeps insertion order). */
  private readonly byNamespace = new Map<string, Held>();
  /**
   * Namespaces holding something loaded without a search (LMDB: followed as they grew), released
   * before any searched one; a search moves its namespace to byNamespace.
   */
  private readonly unsearched = new Map<string, Held>();
  /** Bytes held now, and structures released to stay within the budget since the start. */
  held = 0;
  evictions = 0;
  /** Collections asked for after releases (see COLLECT_FRACTION), and the bytes released since the last. */
  collections = 0;
  private released = 0;
  private collecting = false;
  /** The idle collection's timer (armed while something let go waits for a collection), and whether anything was counted since it was armed. */
  private idle: ReturnType<typeof setTimeout> | undefined;
  private busy = false;
  /** When the idle collection last used collectIdle (performance.now()). */
  private shrunk = Number.NEGATIVE_INFINITY;
  private readonly collectAfter: number;

  /**
   * `budget`: bytes (Infinity: no bound). `collect`: a full collection of the process's garbage,
   * and `collectIdle` the idle one (tests count them).
   */
  constructor(
    readonly budget: number,
    private readonly collect: () => void = fullCollection,
    private readonly collectIdle: () => void = collect === fullCollection ? shrink : collect,
  ) {
    this.collectAfter = Math.max(COLLECT_MIN, budget * COLLECT_FRACTION);
  }

  /** A search of `namespace` begins: it becomes the most recent. */
  searched(namespace: string) {
    this.busy = true;
    const held = this.byNamespace.get(namespace) ?? this.unsearched.get(namespace);
    if (held === undefined) return;
    this.byNamespace.delete(namespace);
    this.unsearched.delete(namespace);
    this.byNamespace.set(namespace, held);
  }

  /**
   * The `kind` structure of `namespace` (e.g. "keyword") holds `bytes` now (first held, or grown or
   * shrunk since), and is let go by `release` (called with the namespace); then the budget is
   * enforced. A namespace not held yet counts as the most recent, or (`searched` false: loaded
   * without a search) goes with the ones released first.
   */
  hold(namespace: string, kind: string, bytes: number, release: (namespace: string) => void, searched = true) {
    const first = this.byNamespace.get(namespace) ?? this.unsearched.get(namespace);
    let last: Held | undefined;
    let h = first;
    while (h !== undefined && h.kind !== kind) {
      last = h;
      h = h.next;
    }
    if (h === undefined) {
      // (Released in the order first held.)
      h = { kind, bytes: 0, release, next: undefined };
      if (last !== undefined) last.next = h;
      else (searched ? this.byNamespace : this.unsearched).set(namespace, h);
    }
    this.held += bytes - h.bytes;
    h.bytes = bytes;
    h.release = release;
    this.busy = true;
    this.enforce();
  }

  /**
   * A search made `bytes` of structures it let go at its end (a packed namespace's lists of that
   * moment): counted with what is released, towards the next collection (issue 32: 15,000
   * namespaces of 20 held whole under 64 MiB, nothing released, searched again: the heap grew by
   * ~50 MiB of such garbage before the collector's own pace took it).
   */
  transient(bytes: number) {
    if (!Number.isFinite(this.budget)) return;
    this.released += bytes;
    this.busy = true;
    this.collectSoon();
  }

  /** Its owner let the structure go itself (an erasure, a rebuild, closing): no longer counted. */
  drop(namespace: string, kind: string) {
    const from = this.byNamespace.has(namespace) ? this.byNamespace : this.unsearched;
    const first = from.get(namespace);
    let before: Held | undefined;
    let h = first;
    while (h !== undefined && h.kind !== kind) {
      before = h;
      h = h.next;
    }
    if (h === undefined) return;
    this.held -= h.bytes;
    if (before !== undefined) before.next = h.next;
    else if (h.next !== undefined) from.set(namespace, h.next);
    else from.delete(namespace);
  }

  /** Whether a structure of the namespace is counted (for tests). */
  holds(namespace: string, kind: string): boolean {
    let h = this.byNamespace.get(namespace) ?? this.unsearched.get(namespace);
    while (h !== undefined && h.kind !== kind) h = h.next;
    return h !== undefined;
  }

  /** Namespaces holding something. */
  get namespaces(): number {
    return this.byNamespace.size + this.unsearched.size;
  }

  /**
   * Releases namespaces loaded without a search, then the least recently searched, until the
   * budget holds (never the most recently searched one).
   */
  enforce() {
    while (this.held > this.budget && (this.unsearched.size > 0 || this.byNamespace.size > 1)) {
      const from = this.unsearched.size > 0 ? this.unsearched : this.byNamespace;
      const [namespace, first] = from.entries().next().value as [string, Held];
      from.delete(namespace);
      for (let h: Held | undefined = first; h !== undefined; h = h.next) {
        this.held -= h.bytes;
        this.released += h.bytes;
        this.evictions++;
        h.release(namespace);
      }
    }
    this.collectSoon();
  }

  /**
   * A full collection on the next turn, once enough was let go since the last (COLLECT_FRACTION);
   * else, once anything was, when things have been quiet for a while (idleCollect).
   */
  private collectSoon() {
    if (this.released >= this.collectAfter && !this.collecting) {
      // (On the next turn: the caller may still hold what it replaced.)
      this.collecting = true;
      setImmediate(() => {
        this.collecting = false;
        this.collectNow();
      });
    } else if (this.released > 0 && this.idle === undefined) this.armIdle();
  }

  private collectNow(collect = this.collect) {
    this.released = 0;
    this.collections++;
    collect();
  }

  /** Checks after idleCollect.ms whether anything was counted, or the process was busy, meanwhile: if not, collects; if so, waits again. */
  private armIdle() {
    this.busy = false;
    const cpu = idleCollect.cpuMs();
    const at = performance.now();
    this.idle = setTimeout(() => {
      this.idle = undefined;
      const share = (idleCollect.cpuMs() - cpu) / Math.max(1, performance.now() - at);
      if (this.busy || share > idleCollect.busyShare) this.armIdle();
      else if (this.released >= idleCollect.min && !this.collecting) {
        const now = performance.now();
        if (now - this.shrunk < idleCollect.shrinkEvery) this.collectNow();
        else {
          this.shrunk = now;
          this.collectNow(this.collectIdle);
        }
      }
    }, idleCollect.ms);
    this.idle.unref();
  }

  /** /metrics figures (storage stats' gauges and counters). */
  metrics(): { gauges: Record<string, [string, number]>; counters: Record<string, [string, number]> } {
    return {
      gauges: {
        memd_search_memory_budget_bytes: [
          "The search-memory budget (--search-memory-mb): what the in-memory keyword lists and vectors of every namespace may hold together.",
          Number.isFinite(this.budget) ? this.budget : 0,
        ],
        memd_search_memory_held_bytes: [
          "Bytes the in-memory keyword lists and vectors hold now (an estimate of their arrays and objects).",
          this.held,
        ],
        memd_search_memory_namespaces: [
          "Namespaces whose keyword lists or vectors are held in memory.",
          this.namespaces,
        ],
      },
      counters: {
        memd_search_memory_evictions_total: [
          "Keyword lists or vectors of a namespace released to stay within the search-memory budget (least recently searched first); brought back at its next search.",
          this.evictions,
        ],
        memd_search_memory_collections_total: [
          "Full garbage collections run after the search-memory budget released a sixteenth of itself (at least 4 MiB; with what searches of small namespaces made and dropped), so that released structures and their rebuilds' garbage do not grow the process beyond the budget; and once searches pause (500 ms, the process under a quarter of a core) after at least 1 MiB was let go (at most every 30 s with the compiled code thrown away and the allocators' free pages given back).",
          this.collections,
        ],
      },
    };
  }
}
