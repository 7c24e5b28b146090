// The LMDB side of as-of reads. An entity's history up to the moment is one range scan of
// events_by_entity ([namespace, entity, atMs, seq]: time order within the entity), whose values
// say what each event did to which memory (stateMarks, storage/asof.ts), so the fold reads no
// event; then only the memories of the page are read (their latest event and record) and made
// into versions by the shared rules. Entries written before format 7 have no value: their
// events are read instead. A memory's history is one reverse scan of events_by_memory.
import type { Key } from "lmdb";
import {
  candidates,
  carriesState,
  changesState,
  foldEvent,
  foldMarks,
  type Latest,
  pageOfVersions,
  versionAt,
} from "../asof";
import { matchesFilter } from "../ops";
import type { EventRecord, MemoryRecord } from "../records";
import type { AsOfQuery, AsOfReads, MemoryPage } from "../storage";
import { END } from "./layout";
import { getRecord, type LmdbState } from "./state";

/** How many index entries one namespace-wide as-of page reads at most before it answers a short page. */
const MAX_NAMESPACE_SCAN = 5000;

export function lmdbAsOf(s: LmdbState): AsOfReads {
  const { dbs } = s;
  const eventAt = (seq: number) => dbs.events.get(seq) as EventRecord;

  /**
   * A namespace as of a moment: events_by_memory ([namespace, memoryId, atMs, seq]) read backwards
   * lists each memory's events together, memories newest first and each one's events newest
   * first, so its latest state-changing event up to the moment is the first such key at or before
   * it. A page stops after MAX_NAMESPACE_SCAN entries, at the end of a memory, with a next page.
   */
  function namespaceAsOf(q: AsOfQuery): MemoryPage {
    const { namespace, asOf } = q;
    const filter = q.filter ?? {};
    const limit = q.limit ?? Number.POSITIVE_INFINITY;
    const out: MemoryRecord[] = [];
    let current: string | undefined;
    let decided = false;
    let finished: string | undefined;
    let scanned = 0;
    const range = dbs.eventsByMemory.getKeys({
      start: q.before === undefined ? [namespace, END] : [namespace, q.before],
      end: [namespace],
      reverse: true,
    });
    for (const k of range) {
      const [, id, atMs, seq] = k as [string, string, number, number];
      if (id !== current) {
        if (current !== undefined) finished = current;
        if (scanned >= MAX_NAMESPACE_SCAN && finished !== undefined) return { memories: out, next: finished };
        current = id;
        decided = false;
      }
      scanned++;
      if (decided || atMs > asOf) continue;
      const e = eventAt(seq);
      if (!changesState(e)) continue;
      decided = true;
      const v = versionAt(id, e, getRecord(s, id), asOf);
      if (v === undefined || !matchesFilter(v, filter)) continue;
      // One more than asked: there is a next page, continuing after the last one shown.
      if (out.length === limit) return { memories: out, next: out.at(-1)!.id };
      out.push(v);
    }
    return { memories: out };
  }

  /** Each memory of an entity's history up to `asOf` and its latest state-changing event then. */
  function fold(namespace: string, entity: string, asOf: number): Map<string, Latest> {
    const latest = new Map<string, Latest>();
    // Keys up to and including asOf: [ns, entity, asOf, seq] sorts before [ns, entity, asOf + 1].
    for (const { key, value } of dbs.eventsByEntity.getRange({
      start: [namespace, entity],
      end: [namespace, entity, asOf + 1],
    })) {
      const seq = (key as unknown[])[3] as number;
      if (typeof value === "string") foldMarks(latest, seq, value);
      else foldEvent(latest, eventAt(seq));
    }
    return latest;
  }

  return {
    async entityTextsAsOf({ namespace, entity, asOf }) {
      const latest = fold(namespace, entity, asOf);
      const texts: { id: string; content: string }[] = [];
      const events = new Map<string, EventRecord>();
      for (const id of candidates(latest, asOf)) {
        const e = eventAt(latest.get(id)!.seq);
        events.set(id, e);
        if (!carriesState(e)) {
          // An event older than observedAt: its version needs the record (versionAt).
          const v = versionAt(id, e, getRecord(s, id), asOf);
          if (v !== undefined) texts.push({ id, content: v.content });
          continue;
        }
        // The checks of versionAt that need no record: an erasure scrubs the record and every
        // event of the memory in one transaction, so its latest event tells it too.
        if (e.newContent === null || e.newContent === undefined) continue;
        if (e.expiresAt !== undefined && e.expiresAt <= asOf) continue;
        texts.push({ id, content: e.newContent });
      }
      return {
        texts,
        versions: (ids) => ids.map((id) => versionAt(id, events.get(id)!, getRecord(s, id), asOf)),
      };
    },

    async entityAsOf(q) {
      if (q.entity === undefined) return namespaceAsOf(q);
      const { namespace, entity, asOf } = q as AsOfQuery & { entity: string };
      const latest = fold(namespace, entity, asOf);
      const ids = candidates(latest, asOf, q.before);
      return pageOfVersions(
        ids,
        (chunk) => chunk.map((id) => versionAt(id, eventAt(latest.get(id)!.seq), getRecord(s, id), asOf)),
        q.filter ?? {},
        q.limit,
      );
    },

    async memoryAsOf(id, asOf) {
      const record = getRecord(s, id);
      if (!record) return undefined;
      const prefix = [record.namespace, id];
      // Newest first from asOf; a REPLACE that retired it is listed under it too.
      for (const k of dbs.eventsByMemory.getKeys({ start: [...prefix, asOf, END], end: prefix, reverse: true })) {
        const e = eventAt((k as Key as unknown[]).at(-1) as number);
        if (changesState(e)) return versionAt(id, e, record, asOf);
      }
      return undefined;
    },
  };
}
