// The LMDB side of as-of reads: an entity's events up to the moment are one range scan of
// events_by_entity ([namespace, entity, atMs, seq]: time order within the entity), folded by
// the shared rules of storage/asof.ts; a memory's are one reverse scan of events_by_memory.
import type { Key } from "lmdb";
import { byIdDescending, changesState, latestByMemory, versionAt } from "../asof";
import type { EventRecord, MemoryRecord } from "../records";
import type { AsOfMethods } from "../storage";
import type { Dbs } from "./index";
import { END } from "./layout";

export function lmdbAsOf(dbs: Dbs, getRecord: (id: string) => MemoryRecord | undefined): AsOfMethods {
  const event = (k: Key) => dbs.events.get((k as unknown[]).at(-1) as number) as EventRecord;
  return {
    async entityAsOf(namespace, entity, asOf) {
      // Keys up to and including asOf: [ns, entity, asOf, seq] sorts before [ns, entity, asOf + 1].
      const range = dbs.eventsByEntity.getKeys({ start: [namespace, entity], end: [namespace, entity, asOf + 1] });
      const latest = latestByMemory(
        (function* () {
          for (const k of range) yield event(k);
        })(),
      );
      const out: MemoryRecord[] = [];
      for (const [id, e] of latest) {
        const v = versionAt(id, e, getRecord(id), asOf);
        if (v) out.push(v);
      }
      return out.sort(byIdDescending);
    },

    async memoryAsOf(id, asOf) {
      const record = getRecord(id);
      if (!record) return undefined;
      const prefix = [record.namespace, id];
      // Newest first from asOf; a REPLACE that retired it is listed under it too.
      for (const k of dbs.eventsByMemory.getKeys({ start: [...prefix, asOf, END], end: prefix, reverse: true })) {
        const e = event(k);
        if (changesState(e)) return versionAt(id, e, record, asOf);
      }
      return undefined;
    },
  };
}
