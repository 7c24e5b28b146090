// Memories as of a moment, replayed from the audit trail: the rules shared by every backend.
// A backend finds, for each memory of a scope, the latest event at or before the moment that
// changed its state (ADD, UPDATE, MERGE, REPLACE or DELETE; SKIP_DUPLICATE and KEEP_EXISTING
// change nothing), and versionAt turns that event and the memory's record into the memory as it
// was then. Expiry needs no event: a version whose expiresAt is at or before the moment is gone,
// whether or not the sweeper had written its DELETE yet, exactly as reads treat it at that time.
import { type EventKind, type EventRecord, type MemoryRecord, observedOf } from "./records";

/** The event kinds that change a memory's state, as persisted. */
export const stateKinds: readonly EventKind[] = ["ADD", "UPDATE", "MERGE", "REPLACE", "DELETE"];
const stateKindSet: ReadonlySet<string> = new Set(stateKinds);

/** Whether an event changes the state of the memories it names. */
export const changesState = (e: EventRecord): boolean => stateKindSet.has(e.event);

/**
 * The memories whose state an event sets: its memory, and the memory a REPLACE retired (a
 * REPLACE's old side). Empty for events that change nothing.
 */
export function touchedBy(e: EventRecord): string[] {
  if (!changesState(e)) return [];
  if (e.event === "REPLACE" && e.mergedFromId && e.mergedFromId !== e.memoryId) return [e.memoryId, e.mergedFromId];
  return [e.memoryId];
}

/**
 * Folds events, oldest first, into each memory's latest state-changing event. The map holds
 * memories that were retired too; versionAt tells them apart.
 */
export function latestByMemory(events: Iterable<EventRecord>): Map<string, EventRecord> {
  const latest = new Map<string, EventRecord>();
  for (const e of events) for (const id of touchedBy(e)) latest.set(id, e);
  return latest;
}

/** Whether memory `id` exists after event `e` (before expiry and erasure are considered). */
export const livesAfter = (id: string, e: EventRecord): boolean =>
  e.event !== "DELETE" && !(e.event === "REPLACE" && e.memoryId !== id);

/** Whether an event carries the memory's whole state (written since observedAt existed). */
export const carriesState = (e: EventRecord): boolean => e.importance !== undefined;

/**
 * Memory `id` as it was current at `asOf` (ms), given `e`, its latest state-changing event at or
 * before `asOf`, and its record as stored now; undefined when it was not current then (deleted,
 * replaced, expired) or when it has been erased since (an erasure removes content from history,
 * so an erased memory never comes back). Events written before observedAt existed carry only
 * content and category: importance, tags, metadata, expiry and observed time then come from the
 * record as it is now (docs/time.md).
 */
export function versionAt(
  id: string,
  e: EventRecord,
  record: MemoryRecord | undefined,
  asOf: number,
): MemoryRecord | undefined {
  if (!livesAfter(id, e)) return undefined;
  // Erased: the record lost its content (content is never empty otherwise), the event too.
  if (record === undefined || record.content === "" || e.newContent === null) return undefined;
  const full = carriesState(e);
  const expiresAt = full ? e.expiresAt : record.expiresAt;
  if (expiresAt !== undefined && expiresAt <= asOf) return undefined;
  const v: MemoryRecord = {
    id,
    namespace: record.namespace,
    entity: record.entity,
    content: e.newContent,
    category: e.category,
    importance: full ? e.importance! : record.importance,
    createdAt: record.createdAt,
    updatedAt: e.atMs,
    state: "current",
  };
  const tags = full ? e.tags : record.tags;
  const metadata = full ? e.metadata : record.metadata;
  if (tags !== undefined) v.tags = tags;
  if (metadata !== undefined) v.metadata = metadata;
  if (record.source !== undefined) v.source = record.source;
  if (expiresAt !== undefined) v.expiresAt = expiresAt;
  v.observedAt = full ? (e.observedAt ?? record.createdAt) : observedOf(record);
  return v;
}

/** Newest first (ids are UUIDv7: id order is creation order), as lists answer. */
export const byIdDescending = (a: MemoryRecord, b: MemoryRecord): number => (a.id < b.id ? 1 : a.id > b.id ? -1 : 0);
