// What an op does to memory records and which event it records: one pure function shared by
// every backend, so that both write exactly the same records for the same ops.
import { type EventRecord, eventState, isCurrent, type MemoryRecord, memoryExtras, observedOf } from "./records";
import { type MemoryOp, type NewMemory, type RevertOp, WriteConflict } from "./storage";

/**
 * The earliest time an event written at `now` may carry: the next millisecond. A client that read
 * its clock before sending a write (`since` for diff and events, which is exclusive) then always
 * finds the write after it, even when both fall in the same millisecond (see settle.ts for the
 * other direction).
 */
export const stampFloor = (now: number) => now + 1;

export interface Planned {
  event: Omit<EventRecord, "seq">;
  /** The memory created by the op (ADD, REPLACE), now current. */
  created?: MemoryRecord;
  /** The target as it is after the op (changed in place, retired, or as it was). */
  target?: MemoryRecord;
}

function recordOf(m: NewMemory, atMs: number): MemoryRecord {
  // Assigned field by field, in the record's order, rather than spread: on every store.
  const r = {
    id: m.id,
    namespace: m.namespace,
    entity: m.entity,
    content: m.content,
    category: m.category,
    importance: m.importance,
  } as MemoryRecord;
  // Tags, metadata, source, key and any field added to the record since (records.ts: memoryExtras).
  for (const f of memoryExtras) {
    const v = (m as Partial<MemoryRecord>)[f];
    if (v !== undefined) (r as Record<string, unknown>)[f] = v;
  }
  r.createdAt = atMs;
  r.updatedAt = atMs;
  if (m.ttlSeconds !== undefined) r.expiresAt = atMs + Math.ceil(m.ttlSeconds * 1000);
  r.state = "current";
  // Valid time: the client's, else the store time (the event's).
  r.observedAt = m.observedAt ?? atMs;
  return r;
}

/** The (namespace, entity, key) a keyed store (an ADD whose memory has a key) claims, if any. */
export function keyOfOp(op: MemoryOp): { namespace: string; entity: string; key: string } | undefined {
  if (op.event === "REVERT") return op.to !== null && op.expect.state !== "current" ? op.key : undefined;
  if (op.event !== "ADD" || op.create.key === undefined) return undefined;
  return { namespace: op.create.namespace, entity: op.create.entity, key: op.create.key };
}

/**
 * What a keyed store does, given the memory holding its key as read inside the transaction (a
 * record whose state is current, expired or not; undefined when none does): "add" a new memory,
 * "update" the holder in place (planOp then writes an UPDATE), or "unchanged" when the holder is
 * current and the store would write exactly what it holds: nothing is written then. The store
 * gives the memory's whole state, as a new store would set it (its category, importance, tags,
 * metadata, source and expiry, with the same defaults); only the id, the creation time and the
 * key stay, and the observed time when the content stays and none is given.
 */
export function keyedOutcome(
  op: Extract<MemoryOp, { event: "ADD" }>,
  holder: MemoryRecord | undefined,
  now: number,
): "add" | "update" | "unchanged" {
  if (holder?.state !== "current") return "add";
  const m = op.create;
  const same = (a: unknown, b: unknown) => Bun.deepEquals(a ?? null, b ?? null, true);
  const unchanged =
    isCurrent(holder, now) &&
    m.content === holder.content &&
    m.category === holder.category &&
    m.importance === holder.importance &&
    same(m.tags, holder.tags) &&
    same(m.metadata, holder.metadata) &&
    m.source === holder.source &&
    m.ttlSeconds === undefined &&
    holder.expiresAt === undefined &&
    (m.observedAt === undefined || m.observedAt === observedOf(holder));
  return unchanged ? "unchanged" : "update";
}

/**
 * Refuses (WriteConflict) a revert that brings back a keyed memory while another current memory
 * holds its key; `holder` is the key's holder as the transaction sees it.
 */
export function checkKeyFree(op: RevertOp, holder: MemoryRecord | undefined) {
  if (holder?.state === "current" && holder.id !== op.target)
    throw new WriteConflict(
      "key_taken",
      `memory ${holder.id} holds the key ${JSON.stringify(holder.key)} now; delete it or revert it first`,
    );
}

/** The state a keyed store gives the memory holding its key (see keyedOutcome). */
function keyedState(holder: MemoryRecord, m: NewMemory, atMs: number): MemoryRecord {
  const next = recordOf({ ...m, id: holder.id, key: holder.key }, atMs);
  next.createdAt = holder.createdAt;
  if (m.observedAt === undefined && m.content === holder.content) next.observedAt = observedOf(holder);
  return next;
}

/**
 * Writes a memory's state after an event onto the event (see EventRecord), so that the trail
 * alone replays every field. Returns the event.
 */
function withState<E extends Planned["event"]>(e: E, m: MemoryRecord): E {
  for (const f of eventState) {
    const v = m[f];
    if (v !== undefined) (e as Record<string, unknown>)[f] = v;
  }
  e.observedAt = observedOf(m);
  return e;
}

function patched(r: MemoryRecord, op: Extract<MemoryOp, { patch: unknown }>, atMs: number): MemoryRecord {
  const { tags, metadata, vector: _vector, ...plain } = op.patch;
  const next: MemoryRecord = { ...r, ...stripUndefined(plain), updatedAt: atMs };
  if (tags === null) delete next.tags;
  else if (tags !== undefined) next.tags = tags;
  if (metadata === null) delete next.metadata;
  else if (metadata !== undefined) next.metadata = metadata;
  return next;
}

const stripUndefined = <T extends object>(o: T): Partial<T> =>
  Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;

/**
 * Plans one op at event time `atMs`. `target` is the op's target as read inside the transaction
 * and already checked to be current (for ADD: the memory holding a keyed store's key, when
 * keyedOutcome says "update"; else undefined).
 */
export function planOp(
  op: MemoryOp,
  target: MemoryRecord | undefined,
  atMs: number,
  actorKeyId: string | null,
): Planned {
  const base = { atMs, actorKeyId, mergedFromId: null as string | null };
  const on = (m: MemoryRecord) => ({ namespace: m.namespace, entity: m.entity, memoryId: m.id, category: m.category });
  switch (op.event) {
    case "ADD": {
      if (target) {
        // A keyed store over the current holder of its key: an edit in place, same id.
        const next = keyedState(target, op.create, atMs);
        const event: Planned["event"] = {
          ...base,
          ...on(next),
          event: "UPDATE",
          oldContent: target.content,
          newContent: next.content,
          reason: "keyed store",
        };
        if (observedOf(next) !== observedOf(target)) event.oldObservedAt = observedOf(target);
        return { target: next, event: withState(event, next) };
      }
      const created = recordOf(op.create, atMs);
      // The fields of base and on(created), assigned: the common case, on every store.
      const event: Planned["event"] = {
        atMs,
        actorKeyId,
        mergedFromId: null,
        namespace: created.namespace,
        entity: created.entity,
        memoryId: created.id,
        category: created.category,
        event: "ADD",
        oldContent: null,
        newContent: created.content,
        reason: null,
      };
      return { created, event: withState(event, created) };
    }
    case "REPLACE": {
      const t = target!;
      const created = recordOf(op.create, atMs);
      return {
        created,
        target: { ...t, state: "replaced", updatedAt: atMs },
        event: withState(
          {
            ...base,
            ...on(created),
            event: "REPLACE",
            oldContent: t.content,
            newContent: created.content,
            mergedFromId: t.id,
            reason: op.reason,
            // The replaced fact keeps its own valid time on the old side.
            oldObservedAt: observedOf(t),
          },
          created,
        ),
      };
    }
    case "MERGE":
    case "UPDATE": {
      const t = target!;
      const next = patched(t, op, atMs);
      const event: Planned["event"] = {
        ...base,
        ...on(next),
        event: op.event,
        oldContent: t.content,
        newContent: next.content,
        reason: op.reason ?? null,
      };
      if (observedOf(next) !== observedOf(t)) event.oldObservedAt = observedOf(t);
      withState(event, next);
      if (op.mergedIds !== undefined) event.mergedIds = op.mergedIds;
      return { target: next, event };
    }
    case "DELETE": {
      const t = target!;
      const event: Planned["event"] = {
        ...base,
        ...on(t),
        event: "DELETE",
        oldContent: t.content,
        newContent: null,
        reason: op.reason,
        observedAt: observedOf(t),
      };
      if (op.mergedInto !== undefined) event.mergedInto = op.mergedInto;
      return { target: { ...t, state: "deleted", updatedAt: atMs }, event };
    }
    case "REVERT": {
      const t = target!;
      // Erased while the revert was planned: its content never comes back.
      if (t.content === "")
        throw new WriteConflict("erased", `memory ${t.id} was erased; its content cannot come back`);
      const revertOf = op.revertOf;
      if (op.to === null)
        return {
          target: { ...t, state: "deleted", updatedAt: atMs },
          event: {
            ...base,
            ...on(t),
            event: "DELETE",
            oldContent: t.content,
            newContent: null,
            reason: op.reason,
            observedAt: observedOf(t),
            revertOf,
          },
        };
      const next = revertedRecord(t, op.to, atMs);
      const alive = t.state === "current";
      const event: Planned["event"] = {
        ...base,
        ...on(next),
        event: alive ? "UPDATE" : "ADD",
        oldContent: alive ? t.content : null,
        newContent: next.content,
        reason: op.reason,
      };
      if (alive && observedOf(next) !== observedOf(t)) event.oldObservedAt = observedOf(t);
      withState(event, next).revertOf = revertOf;
      return { target: next, event };
    }
    case "SKIP_DUPLICATE":
    case "KEEP_EXISTING": {
      const t = target!;
      return {
        target: t,
        event: {
          ...base,
          ...on(t),
          event: op.event,
          oldContent: null,
          newContent: op.newContent,
          reason: op.reason ?? null,
          observedAt: observedOf(t),
        },
      };
    }
  }
}

/** A memory set to a state it had (RevertOp): the record's id, key, source and creation time, the state's fields. */
function revertedRecord(t: MemoryRecord, to: NonNullable<RevertOp["to"]>, atMs: number): MemoryRecord {
  const r: MemoryRecord = { ...t, content: to.content, category: to.category, updatedAt: atMs, state: "current" };
  // The state's fields (records.ts: eventState), each as the state has it or gone.
  for (const f of eventState) {
    if (to[f] === undefined) delete (r as Partial<MemoryRecord>)[f];
    else (r as Record<string, unknown>)[f] = to[f];
  }
  return r;
}

/**
 * Whether an op may act on `target` as read inside the transaction: it must be current, except
 * that an expiry (a DELETE with `expiresAt`) acts on a memory whose time is up, if it still
 * expires at that time, and a revert acts on the memory exactly as it was planned from, in any
 * state (else the whole apply fails: WriteConflict).
 */
export function targetIsLive(op: MemoryOp, target: MemoryRecord | undefined, now: number): target is MemoryRecord {
  if (op.event === "REVERT") {
    if (target?.updatedAt !== op.expect.updatedAt || target.state !== op.expect.state)
      throw new WriteConflict("changed", `memory ${op.target} changed while the revert was planned; try again`);
    return true;
  }
  if (op.event === "DELETE" && op.expiresAt !== undefined)
    return target?.state === "current" && target.expiresAt === op.expiresAt;
  return isCurrent(target, now);
}

/** A write's guard on its entity (RevertOp.entityLastEventAtMs), if the op carries one. */
export const entityGuardOf = (op: MemoryOp): number | undefined =>
  "entityLastEventAtMs" in op ? op.entityLastEventAtMs : undefined;

/** The id of the memory an op acts on, if any. */
export const targetOf = (op: MemoryOp): string | undefined => ("target" in op ? op.target : undefined);

/** The embedding an op gives to the memory it creates or changes, if it sets one. */
export function vectorOf(op: MemoryOp): NewMemory["vector"] {
  if ("create" in op) return op.create.vector;
  if ("patch" in op) return op.patch.vector;
  if (op.event === "REVERT") return op.vector;
  return undefined;
}

/** Whether the searchable part of a memory (its content) differs between two versions. */
export const contentChanged = (a: MemoryRecord, b: MemoryRecord): boolean => a.content !== b.content;

/** A vector as stored: float32, scaled to length 1 (so cosine similarity is a dot product). */
export function normalized(v: Float32Array | number[]): Float32Array {
  let sum = 0;
  for (let i = 0; i < v.length; i++) sum += v[i] * v[i];
  const norm = Math.sqrt(sum) || 1;
  const out = new Float32Array(v.length);
  for (let i = 0; i < v.length; i++) out[i] = v[i] / norm;
  return out;
}

/** Orders search hits: score high to low, then newer first (createdAt, then id: UUIDv7). */
export const byScoreThenNewer = (
  a: { score: number; memory: MemoryRecord },
  b: { score: number; memory: MemoryRecord },
): number =>
  b.score - a.score ||
  b.memory.createdAt - a.memory.createdAt ||
  (a.memory.id < b.memory.id ? 1 : a.memory.id > b.memory.id ? -1 : 0);

/** Whether a memory meets a search filter (or a list query's filters). */
export function matchesFilter(
  m: MemoryRecord,
  f: {
    category?: string;
    categories?: string[];
    tags?: string[];
    observedAfter?: number;
    observedBefore?: number;
    key?: string;
    entityPrefix?: string;
  },
): boolean {
  if (f.key !== undefined && m.key !== f.key) return false;
  if (f.entityPrefix !== undefined && !m.entity.startsWith(f.entityPrefix)) return false;
  if (f.category !== undefined && m.category !== f.category) return false;
  if (f.categories !== undefined && !f.categories.includes(m.category)) return false;
  if (f.observedAfter !== undefined && observedOf(m) < f.observedAfter) return false;
  if (f.observedBefore !== undefined && observedOf(m) >= f.observedBefore) return false;
  if (f.tags?.length) {
    if (!m.tags) return false;
    for (const t of f.tags) if (!m.tags.includes(t)) return false;
  }
  return true;
}
