// The newest current memories of the entities listed most, kept in memory for list reads
// (../entity-lists.ts). The context block without a query reads an entity's newest 1,000 (up to
// 2,000) memories on every call, and each costs a key and a record decoded from LMDB (~2.5 µs:
// 2.5 ms of a call at 1,000, bench/context.ts). A copy here is exact: on every read it is checked
// against the entity's newest events_by_entity key and meta "clockEpoch", and brought up to date
// from the events after it.
// Every change of an entity's memories writes an event under that entity in the same transaction
// (the as-of index, layout.ts, relies on the same), and event times grow per namespace (clock.ts),
// so the events after the copy's key are every change since; an import, whose events may be older,
// bumps clockEpoch, and the copy is then read again.
import type { Key } from "lmdb";
import { deepFreeze, entityLists, recordBytes } from "../entity-lists";
import type { MemoryRecord } from "../records";
import { type Dbs, END } from "./layout";

/** An entity's entry in entity_memories, newest first: its id and record (frozen: shared between reads). */
export type Entry = readonly [id: string, record: MemoryRecord | undefined];

interface Copy {
  /** meta "clockEpoch" when read. */
  epoch: unknown;
  /** The entity's newest events_by_entity key when read (undefined: none). */
  last: Key[] | undefined;
  /** Ids newest first (UUIDv7: id order is creation order, as in entity_memories) and their records. */
  ids: string[];
  records: (MemoryRecord | undefined)[];
  /** The copy holds every entry with an id at or above this one; undefined: every entry of the entity. */
  from: string | undefined;
  /** What its records cost (recordBytes). */
  bytes: number;
}

export class EntityLists {
  private readonly copies = new Map<string, Copy>();
  private held = 0;
  private bytes = 0;

  constructor(private readonly dbs: Dbs) {}

  /** Entries kept in memory now (for /metrics and tests). */
  get entries(): number {
    return this.held;
  }

  /**
   * The entity's entries newest first, after `before` (an id, exclusive) when given: as
   * entity_memories holds them now, from the copy and then from LMDB. Consume it synchronously
   * (within one read transaction): what LMDB adds is kept in the copy.
   */
  *newest(namespace: string, entity: string, before?: string): Generator<Entry> {
    const name = JSON.stringify([namespace, entity]);
    let copy = this.current(name, namespace, entity);
    let after = before;
    let growing: Copy | undefined;
    if (copy) {
      const { ids, records } = copy;
      // ids are sorted newest first: the first one older than `before`.
      let lo = 0;
      if (before !== undefined)
        for (let hi = ids.length; lo < hi; ) {
          const mid = (lo + hi) >>> 1;
          if (ids[mid] >= before) lo = mid + 1;
          else hi = mid;
        }
      for (let i = lo; i < ids.length; i++) yield [ids[i], records[i]];
      if (copy.from === undefined) return;
      // Older entries than the copy holds: read from LMDB, and kept when they continue it.
      if (before === undefined || before >= copy.from) {
        after = copy.from;
        growing = copy;
      }
    } else if (before === undefined) {
      copy = { ...this.stamp(namespace, entity), ids: [], records: [], from: "", bytes: 0 };
      growing = copy;
    }
    const prefix = [namespace, entity];
    try {
      for (const key of this.dbs.entityMemories.getKeys({
        start: after === undefined ? [...prefix, END] : [...prefix, after],
        end: prefix,
        exclusiveStart: after !== undefined,
        reverse: true,
      })) {
        const id = (key as string[])[2];
        const r = this.dbs.memories.get(id) as MemoryRecord | undefined;
        const b = recordBytes(r);
        if (growing && growing.ids.length < entityLists.maxEntries && growing.bytes + b <= entityLists.totalBytes) {
          growing.ids.push(id);
          growing.records.push(r && deepFreeze(r));
          // (A read that stops here leaves the copy holding what it walked.)
          growing.from = id;
          growing.bytes += b;
          if (this.copies.get(name) === growing) {
            this.held++;
            this.bytes += b;
          }
        } else growing = undefined;
        yield [id, r];
      }
      if (growing) growing.from = undefined;
    } finally {
      if (copy && !this.copies.has(name) && copy.ids.length >= entityLists.minEntries) {
        this.copies.set(name, copy);
        this.held += copy.ids.length;
        this.bytes += copy.bytes;
      }
      this.bound();
    }
  }

  /** Forgets the entity's copy (after an erasure: it held the erased contents). */
  forget(namespace: string, entity: string) {
    const name = JSON.stringify([namespace, entity]);
    const copy = this.copies.get(name);
    if (!copy) return;
    this.copies.delete(name);
    this.held -= copy.ids.length;
    this.bytes -= copy.bytes;
  }

  /** The entity's meta "clockEpoch" and newest event key now. */
  private stamp(namespace: string, entity: string): { epoch: unknown; last: Key[] | undefined } {
    const epoch = this.dbs.meta.get("clockEpoch");
    for (const key of this.dbs.eventsByEntity.getKeys({
      start: [namespace, entity, END],
      end: [namespace, entity],
      reverse: true,
      limit: 1,
    }))
      return { epoch, last: key as Key[] };
    return { epoch, last: undefined };
  }

  /** The entity's copy brought up to date, or undefined (none kept, or read again next). */
  private current(name: string, namespace: string, entity: string): Copy | undefined {
    const copy = this.copies.get(name);
    if (!copy) return undefined;
    const now = this.stamp(namespace, entity);
    // The most recently read last (a Map keeps insertion order).
    this.copies.delete(name);
    this.copies.set(name, copy);
    if (now.epoch === copy.epoch && sameKey(now.last, copy.last)) return copy;
    if (now.epoch === copy.epoch && copy.last !== undefined && this.catchUp(copy, namespace, entity)) {
      copy.last = now.last;
      return copy;
    }
    this.forget(namespace, entity);
    return undefined;
  }

  /**
   * Applies the events after the copy's key: each memory they name is read again and kept, moved
   * or dropped as entity_memories now holds it (there exactly while its state is current). False
   * when there were too many, or one without its marks (an event older than format 7).
   */
  private catchUp(copy: Copy, namespace: string, entity: string): boolean {
    const touched = new Set<string>();
    let n = 0;
    for (const { value } of this.dbs.eventsByEntity.getRange({
      start: copy.last,
      end: [namespace, entity, END],
      exclusiveStart: true,
    })) {
      if (typeof value !== "string" || ++n > entityLists.maxCatchUp) return false;
      if (value === "") continue;
      for (const mark of value.split(",")) {
        const at = mark.indexOf("@");
        touched.add(at === -1 ? mark.slice(1) : mark.slice(1, at));
      }
    }
    for (const id of touched) {
      const r = this.dbs.memories.get(id) as MemoryRecord | undefined;
      const i = place(copy.ids, id);
      const found = copy.ids[i] === id;
      if (found) {
        const b = recordBytes(copy.records[i]);
        copy.ids.splice(i, 1);
        copy.records.splice(i, 1);
        copy.bytes -= b;
        this.held--;
        this.bytes -= b;
      }
      const listed = r?.state === "current" && r.namespace === namespace && r.entity === entity;
      if (listed && (copy.from === undefined || id >= copy.from)) {
        copy.ids.splice(i, 0, id);
        copy.records.splice(i, 0, deepFreeze(r));
        const b = recordBytes(r);
        copy.bytes += b;
        this.held++;
        this.bytes += b;
      }
    }
    return true;
  }

  /** Drops the least recently read copies while over a total (a copy over one alone goes too). */
  private bound() {
    for (const [name, copy] of this.copies) {
      if (this.held <= entityLists.totalEntries && this.bytes <= entityLists.totalBytes) return;
      this.copies.delete(name);
      this.held -= copy.ids.length;
      this.bytes -= copy.bytes;
    }
  }
}

/** Where `id` is or would go in ids sorted newest first (descending). */
function place(ids: readonly string[], id: string): number {
  let lo = 0;
  for (let hi = ids.length; lo < hi; ) {
    const mid = (lo + hi) >>> 1;
    if (ids[mid] > id) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

const sameKey = (a: Key[] | undefined, b: Key[] | undefined) =>
  a === b || (a !== undefined && b !== undefined && a.length === b.length && a.every((x, i) => x === b[i]));
