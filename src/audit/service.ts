import { isoTime } from "../wire/time";
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
