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
 * Small namespaces (holding at most `upTo` bytes together: a keyword space still packed, a few
 * hundred vectors) are held within a share of the budget, `share` of it and at least `least`
 * (never more than the budget): past it the least recently searched small ones are released,
 * whatever the rest holds. Only where the owner passes it (LMDB): there a small namespace is
 * built again from its records in under a millisecond at its next search (p50 0.60-0.76 ms at 20
 * memories), while holding one cost the process ~6.5 KiB beside what is counted, its objects
 * scattered among the searches' garbage (issue 32: 10,000 namespaces of 20, each searched, 1.84x
 * the anonymous memory of one namespace of the same 200,000 memories, whose lists are read mapped
 * from their snapshot; 1.05-1.28x with this share, a 64th, or a 32nd or a 256th alike).
 */
export const smallNamespaces = { upTo: 64 * 1024, share: 1 / 64, least: 2 * 2 ** 20 };

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
   * Once this much was let go since the last shrink, it shrinks again after `shrinkSoonest` ms
   * rather than shrinkEvery: a burst of searches over 10,000 small namespaces lets ~35 MiB go,
   * and within 30 s of a shrink (the one after the stores before it) its full collection alone
   * left RssAnon at 109 MiB against 49 shrunk (issue 32, LMDB).
   */
  shrinkAfter: 16 * 2 ** 20,
  shrinkSoonest: 5_000,
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
 * At most once every `idleCollect.shrinkEvery` ms (a full collection alone between; sooner after
 * much was let go, see shrinkAfter): the code compiled again costs CPU, and bursts of searches a
 * second apart would pay it at each.
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
  /**
   * Small namespaces (see smallNamespaces) by what they hold, least recently searched first, when
   * their share binds; and the bytes they hold together.
   */
  private readonly small = new Map<string, number>();
  private smallHeld = 0;
  /** The namespace of the last search (never released to make room). */
  private last: string | undefined;
  /** What small namespaces may hold together (Infinity: no share of their own). */
  readonly smallBudget: number;
  /** Bytes held now, and structures released to stay within the budget since the start. */
  held = 0;
  evictions = 0;
  /** Collections asked for after releases (see COLLECT_FRACTION), and the bytes released since the last. */
  collections = 0;
  private released = 0;
  /** Bytes released or let go since the last shrink (see idleCollect.shrinkAfter). */
  private sinceShrink = 0;
  private collecting = false;
  /** The idle collection's timer (armed while something let go waits for a collection), and whether anything was counted since it was armed. */
  private idle: ReturnType<typeof setTimeout> | undefined;
  private busy = false;
  /** When the idle collection last used collectIdle (performance.now()). */
  private shrunk = Number.NEGATIVE_INFINITY;
  private readonly collectAfter: number;

  private readonly collect: () => void;
  private readonly collectIdle: () => void;

  /**
   * `budget`: bytes (Infinity: no bound). `collect`: a full collection of the process's garbage,
   * and `collectIdle` the idle one (tests count them). `smallShare`: small namespaces are held
   * within a share of the budget (see smallNamespaces).
   */
  constructor(
    readonly budget: number,
    o: { collect?: () => void; collectIdle?: () => void; smallShare?: boolean } = {},
  ) {
    this.collect = o.collect ?? fullCollection;
    this.collectIdle = o.collectIdle ?? o.collect ?? shrink;
    this.collectAfter = Math.max(COLLECT_MIN, budget * COLLECT_FRACTION);
    const share = Math.max(budget * smallNamespaces.share, smallNamespaces.least);
    this.smallBudget = o.smallShare && share < budget ? share : Number.POSITIVE_INFINITY;
  }

  /** A search of `namespace` begins: it becomes the most recent. */
  searched(namespace: string) {
    this.busy = true;
    this.last = namespace;
    const bytes = this.small.get(namespace);
    if (bytes !== undefined) {
      this.small.delete(namespace);
      this.small.set(namespace, bytes);
    }
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
    this.sized(namespace);
    this.enforce();
  }

  /** Files the namespace with the small ones or not, by what it holds now (see smallNamespaces). */
  private sized(namespace: string) {
    if (this.smallBudget === Number.POSITIVE_INFINITY) return;
    let total = 0;
    for (let h = this.byNamespace.get(namespace) ?? this.unsearched.get(namespace); h !== undefined; h = h.next)
      total += h.bytes;
    const was = this.small.get(namespace);
    if (was !== undefined) this.smallHeld -= was;
    if (total > 0 && total <= smallNamespaces.upTo) {
      this.small.set(namespace, total);
      this.smallHeld += total;
    } else this.small.delete(namespace);
  }

  /**
   * A search made `bytes` of structures it let go at its end (a packed namespace's lists of that
   * moment), or a background task as much garbage (LMDB's look for namespaces due a snapshot):
   * counted with what is released, towards the next collection (issue 32: 15,000 namespaces of 20
   * held whole under 64 MiB, nothing released, searched again: the heap grew by ~50 MiB of such
   * garbage before the collector's own pace took it).
   */
  transient(bytes: number) {
    if (!Number.isFinite(this.budget)) return;
    this.released += bytes;
    this.sinceShrink += bytes;
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
    this.sized(namespace);
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
   * budget holds (never the most recently searched one); and the least recently searched small
   * ones until their share holds (never the last searched).
   */
  enforce() {
    while (this.held > this.budget && (this.unsearched.size > 0 || this.byNamespace.size > 1)) {
      const from = this.unsearched.size > 0 ? this.unsearched : this.byNamespace;
      this.release(from.keys().next().value as string);
    }
    while (this.smallHeld > this.smallBudget) {
      const [oldest, next] = this.small.keys();
      const namespace = oldest === this.last ? next : oldest;
      if (namespace === undefined) break;
      this.release(namespace);
    }
    this.collectSoon();
  }

  /** Lets every structure of the namespace go. */
  private release(namespace: string) {
    const from = this.unsearched.has(namespace) ? this.unsearched : this.byNamespace;
    const first = from.get(namespace);
    from.delete(namespace);
    const small = this.small.get(namespace);
    if (small !== undefined) {
      this.small.delete(namespace);
      this.smallHeld -= small;
    }
    for (let h: Held | undefined = first; h !== undefined; h = h.next) {
      this.held -= h.bytes;
      this.released += h.bytes;
      this.sinceShrink += h.bytes;
      this.evictions++;
      h.release(namespace);
    }
  }

  /**
   * A full collection on the next turn, once enough was let go since the last (COLLECT_FRACTION);
   * else, once anything was, when things have been quiet for a while (idleCollect); and a shrink
   * then once much was let go since the last (idleCollect.shrinkAfter), collected or not.
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
    if (this.sinceShrink >= idleCollect.shrinkAfter && this.idle === undefined) this.armIdle();
  }

  private collectNow(collect = this.collect) {
    this.released = 0;
    this.collections++;
    collect();
  }

  /**
   * Checks after idleCollect.ms whether anything was counted, or the process was busy, meanwhile:
   * if not, shrinks (when due: idleCollect.shrinkEvery) or collects; if so, waits again. A shrink
   * owed for what was let go (shrinkAfter) but not due yet is waited for.
   */
  private armIdle() {
    this.busy = false;
    const cpu = idleCollect.cpuMs();
    const at = performance.now();
    this.idle = setTimeout(() => {
      this.idle = undefined;
      const share = (idleCollect.cpuMs() - cpu) / Math.max(1, performance.now() - at);
      if (this.busy || share > idleCollect.busyShare || this.collecting) return this.armIdle();
      const now = performance.now();
      const owed = this.sinceShrink >= idleCollect.shrinkAfter;
      const due = now - this.shrunk >= (owed ? idleCollect.shrinkSoonest : idleCollect.shrinkEvery);
      if (due && (owed || this.released >= idleCollect.min)) {
        this.shrunk = now;
        this.sinceShrink = 0;
        this.collectNow(this.collectIdle);
        return;
      }
      if (this.released >= idleCollect.min) this.collectNow();
      if (owed) this.armIdle();
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
        memd_search_memory_small_budget_bytes: [
          "What namespaces holding at most 64 KiB of keyword lists and vectors may hold together (LMDB: a sixty-fourth of the budget, at least 2 MiB); past it the least recently searched of them are released (built again from their records at their next search). 0: no share of their own.",
          Number.isFinite(this.smallBudget) ? this.smallBudget : 0,
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
          "Full garbage collections run after the search-memory budget released a sixteenth of itself (at least 4 MiB; with what searches of small namespaces made and dropped), so that released structures and their rebuilds' garbage do not grow the process beyond the budget; and once searches pause (500 ms, the process under a quarter of a core) after at least 1 MiB was let go (at most every 30 s, or 5 s after 16 MiB were let go, with the compiled code thrown away and the allocators' free pages given back).",
          this.collections,
        ],
      },
    };
  }
}
