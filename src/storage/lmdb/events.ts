// The LMDB audit trail reads: a range of one of the event indexes (layout.ts), then the events.
import type { Key } from "lmdb";
import type { EventRecord } from "../records";
import type { EventReads } from "../storage";
import { type Dbs, END, keys } from "./layout";
import type { LmdbState } from "./state";

export function lmdbEvents(s: LmdbState): EventReads {
  const { dbs } = s;
  return {
    async newestEvents(scope, limit) {
      const { db, prefix } = keys.eventIndex(scope);
      return loadEvents(dbs, dbs[db].getKeys({ start: [...prefix, END], end: prefix, reverse: true, limit }));
    },

    async eventsAfter(scope, afterMs, limit) {
      const { db, prefix } = keys.eventIndex(scope);
      return loadEvents(dbs, dbs[db].getKeys({ start: [...prefix, afterMs + 1], end: [...prefix, END], limit }));
    },
  };
}

function loadEvents(dbs: Dbs, indexKeys: Iterable<Key>): EventRecord[] {
  const out: EventRecord[] = [];
  for (const k of indexKeys as Iterable<unknown[]>) out.push(dbs.events.get(k.at(-1) as number) as EventRecord);
  return out;
}
