// The LMDB side of as-of reads. An entity's history up to the moment is one range scan of
// events_by_entity ([namespace, entity, atMs, seq]: time order within the entity), whose values
// say what each event did to which memory (stateMarks, storage/asof.ts), so the fold reads no
// event; then only the memories of the page are read (their latest event and record) and made
// into versions by the shared rules. Entries written before format 7 have no value: their
// events are read instead. A memory's history is one reverse scan of events_by_memory.
import type { Key } from "lmdb";
import { candidates, changesState, foldEvent, foldMarks, type Latest, pageOfVersions, versionAt } from "../asof";
import type { EventRecord, MemoryRecord } from "../records";
import type { AsOfReads } from "../storage";
import type { Dbs } from "./index";
import { END } from "./layout";

export function lmdbAsOf(dbs: Dbs, getRecord: (id: string) => MemoryRecord | undefined): AsOfReads {
  const eventAt = (seq: number) => dbs.events.get(seq) as EventRecord;
  return {
    async entityAsOf(q) {
      const { namespace, entity, asOf } = q;
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
      const ids = candidates(latest, asOf, q.before);
      return pageOfVersions(
        ids,
        (chunk) => chunk.map((id) => versionAt(id, eventAt(latest.get(id)!.seq), getRecord(id), asOf)),
        q.filter ?? {},
        q.limit,
      );
    },

    async memoryAsOf(id, asOf) {
      const record = getRecord(id);
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
