import { isoTime } from "../http/time";
import { END, type Store, type Writes } from "../storage/store";
import type { AuditEvent, EventKind, EventRecord } from "./model";

/**
 * Hands out event sequence numbers and times. Times are strictly increasing per namespace:
 * an event landing in the same millisecond as the previous one of its namespace takes the next
 * free millisecond. So `createdAt` alone is a total order per namespace, and a client paging
 * with "since the last createdAt I saw" never loses or repeats an event.
 * Only call inside a write transaction: that is what serializes the callers.
 */
export class EventClock {
  private seq: number;
  private readonly lastMs = new Map<string, number>();

  constructor(private readonly store: Store) {
    const last = [...store.dbs.events.getKeys({ reverse: true, limit: 1 })][0];
    this.seq = typeof last === "number" ? last : 0;
  }

  next(namespace: string, now = Date.now()): { seq: number; atMs: number } {
    let last = this.lastMs.get(namespace);
    if (last === undefined) {
      const [key] = [
        ...this.store.dbs.eventsByNs.getKeys({ start: [namespace, END], end: [namespace], reverse: true, limit: 1 }),
      ] as [string, number, number][];
      last = key ? key[1] : 0;
    }
    const atMs = Math.max(now, last + 1);
    this.lastMs.set(namespace, atMs);
    return { seq: ++this.seq, atMs };
  }
}

export type NewEvent = Omit<EventRecord, "seq" | "atMs">;

/**
 * Stages one event and its index entries. Call from a write plan (storage/store.ts writeDurably).
 * A plan that fails after this leaves a gap in the sequence, never a half-written event.
 */
export function appendEvent(store: Store, clock: EventClock, w: Writes, input: NewEvent): EventRecord {
  const { seq, atMs } = clock.next(input.namespace);
  const record: EventRecord = { ...input, seq, atMs };
  const { dbs } = store;
  w.put(dbs.events, seq, record);
  w.put(dbs.eventsByNs, [input.namespace, atMs, seq], null);
  w.put(dbs.eventsByEntity, [input.namespace, input.entity, atMs, seq], null);
  w.put(dbs.eventsByMemory, [input.namespace, input.memoryId, atMs, seq], null);
  // A REPLACE also belongs to the history of the memory it superseded.
  if (input.mergedFromId && input.mergedFromId !== input.memoryId)
    w.put(dbs.eventsByMemory, [input.namespace, input.mergedFromId, atMs, seq], null);
  return record;
}

/** Shorthand for an event with only some of the nullable fields set. */
export function eventOf(
  kind: EventKind,
  m: { id: string; namespace: string; entity: string; category: string },
  actorKeyId: string | null,
  fields: Partial<Pick<EventRecord, "oldContent" | "newContent" | "mergedFromId" | "reason">> = {},
): NewEvent {
  return {
    namespace: m.namespace,
    entity: m.entity,
    memoryId: m.id,
    category: m.category,
    event: kind,
    oldContent: fields.oldContent ?? null,
    newContent: fields.newContent ?? null,
    mergedFromId: fields.mergedFromId ?? null,
    reason: fields.reason ?? null,
    actorKeyId,
  };
}

export interface EventScope {
  namespace: string;
  entity?: string;
  memoryId?: string;
}

function indexFor(store: Store, scope: EventScope) {
  if (scope.memoryId) return { db: store.dbs.eventsByMemory, prefix: [scope.namespace, scope.memoryId] };
  if (scope.entity) return { db: store.dbs.eventsByEntity, prefix: [scope.namespace, scope.entity] };
  return { db: store.dbs.eventsByNs, prefix: [scope.namespace] };
}

/** Events of a scope, newest first. Cost follows `limit`, not the history. */
export function newestEvents(store: Store, scope: EventScope, limit: number): EventRecord[] {
  const { db, prefix } = indexFor(store, scope);
  const keys = [...db.getKeys({ start: [...prefix, END], end: prefix, reverse: true, limit })];
  return load(store, keys as unknown[][]);
}

/** Up to `limit` events of a scope strictly after `afterMs`, oldest first. */
export function eventsAfter(store: Store, scope: EventScope, afterMs: number, limit: number): EventRecord[] {
  const { db, prefix } = indexFor(store, scope);
  const keys = [...db.getKeys({ start: [...prefix, afterMs + 1], end: [...prefix, END], limit })];
  return load(store, keys as unknown[][]);
}

function load(store: Store, keys: unknown[][]): EventRecord[] {
  return keys.map((k) => store.dbs.events.get(k[k.length - 1] as number) as EventRecord);
}

/** The public shape of an event (spec 2.6): every field present, null where empty. */
export function toAuditEvent(e: EventRecord): AuditEvent {
  return {
    id: String(e.seq),
    memoryId: e.memoryId,
    namespace: e.namespace,
    entity: e.entity,
    event: e.event,
    oldContent: e.oldContent,
    newContent: e.newContent,
    mergedFromId: e.mergedFromId,
    reason: e.reason,
    createdAt: isoTime(e.atMs),
    actorKeyId: e.actorKeyId,
  };
}
