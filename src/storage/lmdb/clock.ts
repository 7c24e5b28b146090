import { stampFloor } from "../ops";
import { type Dbs, END } from "./layout";

/** The largest numeric key of a sub-database keyed by seq (0 when empty). */
export const lastKey = (db: Dbs["events"]): number => {
  const [k] = db.getKeys({ reverse: true, limit: 1 });
  return typeof k === "number" ? k : 0;
};

/** How many namespaces keep their last time in memory; others are read back from the index. */
const MAX_NAMESPACES = 10_000;

/**
 * Hands out event sequence numbers and times. Times are strictly increasing per namespace:
 * an event landing in the same millisecond as the previous one of its namespace takes the next
 * free millisecond. So `createdAt` alone is a total order per namespace, and a client paging
 * with "since the last createdAt I saw" never loses or repeats an event.
 * Only call inside a write transaction: that is what serializes the callers. The data dir lock
 * keeps a second process from handing out the same numbers.
 */
export class EventClock {
  private seq = 0;
  /** meta "clockEpoch" when `seq` and `lastMs` were read; an import bumps it (see layout.ts). */
  private epoch: unknown;
  /** Most recently used namespaces first out: a bounded cache of the events_by_ns index. */
  private readonly lastMs = new Map<string, number>();

  constructor(private readonly dbs: Dbs) {
    this.reload();
  }

  private reload() {
    this.epoch = this.dbs.meta.get("clockEpoch");
    const last = lastKey(this.dbs.events);
    // An import reserves the seqs of its events before writing them (meta "seqFloor").
    const floor = (this.dbs.meta.get("seqFloor") as number | undefined) ?? 0;
    // An erasure's seq is in the trail but no event has it.
    this.seq = Math.max(last, lastKey(this.dbs.erasureSeqs), floor);
    this.lastMs.clear();
  }

  /** Re-reads the clock if an import moved it: call once at the start of each write transaction. */
  sync() {
    if (this.dbs.meta.get("clockEpoch") !== this.epoch) this.reload();
  }

  /** The next seq and time of an event of `namespace`, within a write transaction begun with sync(). */
  next(namespace: string, now = Date.now()): { seq: number; atMs: number } {
    let last = this.lastMs.get(namespace);
    if (last === undefined) {
      const [key] = [
        ...this.dbs.eventsByNs.getKeys({ start: [namespace, END], end: [namespace], reverse: true, limit: 1 }),
      ] as [string, number, number][];
      last = key ? key[1] : 0;
    } else this.lastMs.delete(namespace);
    const atMs = Math.max(stampFloor(now), last + 1);
    this.lastMs.set(namespace, atMs);
    if (this.lastMs.size > MAX_NAMESPACES) this.lastMs.delete(this.lastMs.keys().next().value!);
    return { seq: ++this.seq, atMs };
  }

  /** The last seq handed out. */
  get handedOut() {
    return this.seq;
  }

  /** How many namespaces are cached (for tests of the bound). */
  get cached() {
    return this.lastMs.size;
  }
}
