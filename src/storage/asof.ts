// Memories as of a moment, replayed from the audit trail: the rules shared by every backend.
// A backend finds, for each memory of a scope, the latest event at or before the moment that
// changed its state (ADD, UPDATE, MERGE, REPLACE or DELETE; SKIP_DUPLICATE and KEEP_EXISTING
// change nothing), and versionAt turns that event and the memory's record into the memory as it
// was then. Expiry needs no event: a version whose expiresAt is at or before the moment is gone,
// whether or not the sweeper had written its DELETE yet, exactly as reads treat it at that time.
import { matchesFilter } from "./ops";
import { type EventKind, type EventRecord, eventState, type MemoryRecord, memoryExtras, observedOf } from "./records";

/** The fields an event carries of the memory's state after it. */
const carried = new Set<string>(eventState);

/** The event kinds that change a memory's state, as persisted. */
export const stateKinds: readonly EventKind[] = ["ADD", "UPDATE", "MERGE", "REPLACE", "DELETE"];
const stateKindSet: ReadonlySet<string> = new Set(stateKinds);

/** Whether an event changes the state of the memories it names. */
export const changesState = (e: EventRecord): boolean => stateKindSet.has(e.event);

/**
 * The memories whose state an event sets: its memory, and the memory a REPLACE retired (a
 * REPLACE's old side). Empty for events that change nothing.
 */
function touchedBy(e: EventRecord): string[] {
  if (!changesState(e)) return [];
  if (e.event === "REPLACE" && e.mergedFromId && e.mergedFromId !== e.memoryId) return [e.memoryId, e.mergedFromId];
  return [e.memoryId];
}

/** Whether memory `id` exists after event `e` (before expiry and erasure are considered). */
const livesAfter = (id: string, e: EventRecord): boolean =>
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
  // Tags, metadata, source, key and any field added since: the event's when it carries it, else
  // the record's (source and key never change).
  for (const f of memoryExtras) {
    const x = full && carried.has(f) ? e[f as (typeof eventState)[number]] : record[f];
    if (x !== undefined) (v as Record<string, unknown>)[f] = x;
  }
  if (expiresAt !== undefined) v.expiresAt = expiresAt;
  v.observedAt = full ? (e.observedAt ?? record.createdAt) : observedOf(record);
  return v;
}

/**
 * What an event does to each memory it touches, as written in the value of its
 * events_by_entity entry on LMDB (so that an as-of read folds an entity's history from one range
 * scan, without reading each event): `+id` (current after it, `+id@expiresAt` with an expiry) or
 * `-id` (retired by it), joined by commas; empty for an event that changes nothing.
 */
export function stateMarks(e: EventRecord): string {
  return touchedBy(e)
    .map((id) => (livesAfter(id, e) ? (e.expiresAt === undefined ? `+${id}` : `+${id}@${e.expiresAt}`) : `-${id}`))
    .join(",");
}

/** A memory's latest state-changing event up to a moment, as an as-of read folds it. */
export interface Latest {
  seq: number;
  alive: boolean;
  /** Its expiry after that event, when the event tells it (see carriesState). */
  expiresAt?: number;
}

/** Folds one event's marks (stateMarks) into `latest`. */
export function foldMarks(latest: Map<string, Latest>, seq: number, marks: string) {
  if (marks === "") return;
  for (const m of marks.split(",")) {
    const at = m.indexOf("@");
    const id = at === -1 ? m.slice(1) : m.slice(1, at);
    latest.set(id, at === -1 ? { seq, alive: m[0] === "+" } : { seq, alive: true, expiresAt: Number(m.slice(at + 1)) });
  }
}

/** Folds an event read whole (one written before stateMarks existed) into `latest`. */
export function foldEvent(latest: Map<string, Latest>, e: EventRecord) {
  for (const id of touchedBy(e))
    latest.set(
      id,
      livesAfter(id, e) ? { seq: e.seq, alive: true, expiresAt: e.expiresAt } : { seq: e.seq, alive: false },
    );
}

/** The memories of a fold that may be current at `asOf`, newest first, after the cursor `before`. */
export function candidates(latest: Map<string, Latest>, asOf: number, before?: string): string[] {
  const out: string[] = [];
  for (const [id, l] of latest)
    if (l.alive && (l.expiresAt === undefined || l.expiresAt > asOf) && (before === undefined || id < before))
      out.push(id);
  return out.sort((a, b) => (a < b ? 1 : a > b ? -1 : 0));
}

/**
 * A page from candidate ids (newest first): each made into its version by `load` (undefined when
 * it was not current after all: expired by its record's expiry, or erased since) and kept when it
 * meets the filter. `load` takes ids in chunks, so a backend can read them in one round trip.
 */
export async function pageOfVersions(
  ids: readonly string[],
  load: (ids: string[]) => Promise<(MemoryRecord | undefined)[]> | (MemoryRecord | undefined)[],
  filter: Parameters<typeof matchesFilter>[1],
  limit = Number.POSITIVE_INFINITY,
): Promise<{ memories: MemoryRecord[]; next?: string }> {
  const out: MemoryRecord[] = [];
  const chunk = Number.isFinite(limit) ? Math.min(1000, Math.max(64, limit + 1)) : 1000;
  for (let i = 0; i < ids.length; i += chunk) {
    for (const v of await load(ids.slice(i, i + chunk))) {
      if (v === undefined || !matchesFilter(v, filter)) continue;
      // One more than asked: there is a next page, continuing after the last one shown.
      if (out.length === limit) return { memories: out, next: out.at(-1)!.id };
      out.push(v);
    }
  }
  return { memories: out };
}
