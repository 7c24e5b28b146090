// Writes staged by a write plan and applied together once the plan has finished (see
// writes.ts, writeDurably).
import type { Database, Key } from "lmdb";
import { stateMarks } from "../asof";
import type { EventRecord } from "../records";
import { type Dbs, keys } from "./layout";

/** Stages an event and its index entries. */
export function putEvent(w: Writes, dbs: Dbs, event: EventRecord) {
  const { namespace: ns, atMs, seq } = event;
  w.put(dbs.events, seq, event);
  w.put(dbs.eventsByNs, keys.eventByNs(ns, atMs, seq), null);
  // The value says what the event did to which memory (as-of reads fold it without the event).
  w.put(dbs.eventsByEntity, keys.eventByEntity(ns, event.entity, atMs, seq), stateMarks(event));
  w.put(dbs.eventsByMemory, keys.eventByMemory(ns, event.memoryId, atMs, seq), null);
  // A REPLACE also belongs to the history of the memory it superseded.
  if (event.mergedFromId && event.mergedFromId !== event.memoryId)
    w.put(dbs.eventsByMemory, keys.eventByMemory(ns, event.mergedFromId, atMs, seq), null);
}

/** Puts and removes staged by a write plan; applied together once the plan has finished. */
export class Writes {
  private readonly ops: [db: Database, key: unknown, value: unknown, remove: boolean][] = [];
  put(db: Database, key: unknown, value: unknown) {
    this.ops.push([db, key, value, false]);
  }
  remove(db: Database, key: unknown) {
    this.ops.push([db, key, undefined, true]);
  }
  /** Applies the staged writes inside the current write transaction. */
  apply() {
    for (const [db, key, value, remove] of this.ops) {
      if (remove) db.removeSync(key as Key);
      else db.putSync(key as Key, value);
    }
  }
}
