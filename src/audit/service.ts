import type { EventReads } from "../storage/storage";
import { invalidField } from "../wire/errors";
import { asOfField, instantField, isoTime, parseIsoTime } from "../wire/time";
import type { AuditEvent, EventRecord } from "./model";

/** The public shape of an event (spec 2.6): every field present, null where empty (revertOf: only where set). */
export function toAuditEvent(e: EventRecord): AuditEvent {
  const out: AuditEvent = {
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
  if (e.revertOf !== undefined) out.revertOf = e.revertOf;
  if (e.mergedIds !== undefined) out.mergedIds = e.mergedIds;
  if (e.mergedInto !== undefined) out.mergedInto = e.mergedInto;
  return out;
}

/** Parses `since` (strict ISO 8601, see wire/time.ts) to milliseconds, or throws 400. */
export function parseSince(since: string): number {
  const ms = parseIsoTime(since);
  if (ms === undefined) throw invalidField("since", "must be an ISO 8601 timestamp, e.g. 2026-01-31T12:00:00.000Z");
  return ms;
}

/**
 * Reads a request's `asOf` for a read of `namespace` (asOfField): an instant after now is
 * accepted up to the namespace's newest event, which the event clock may have stamped ahead of
 * the wall clock during a bulk change. The newest event is read only for such an instant.
 */
export async function readAsOf(
  storage: Pick<EventReads, "newestEvents">,
  namespace: string | undefined,
  text: string | undefined,
): Promise<number | undefined> {
  const now = Date.now();
  const ms = instantField("asOf", text);
  if (ms === undefined || ms <= now || namespace === undefined) return asOfField(text, now);
  const [newest] = await storage.newestEvents({ namespace }, 1);
  return asOfField(text, now, newest?.atMs ?? now);
}
