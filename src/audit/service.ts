import { invalidField } from "../wire/errors";
import { isoTime, parseIsoTime } from "../wire/time";
import type { AuditEvent, EventRecord } from "./model";

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
    observedAt: e.observedAt === undefined ? null : isoTime(e.observedAt),
    oldObservedAt: e.oldObservedAt === undefined ? null : isoTime(e.oldObservedAt),
  };
}

/** Parses `since` (strict ISO 8601, see wire/time.ts) to milliseconds, or throws 400. */
export function parseSince(since: string): number {
  const ms = parseIsoTime(since);
  if (ms === undefined) throw invalidField("since", "must be an ISO 8601 timestamp, e.g. 2026-01-31T12:00:00.000Z");
  return ms;
}
