import { Type } from "@sinclair/typebox";
import { t } from "elysia";
import { limits } from "../config/limits";
import { LimitParam } from "../http/query";
import { EventRecord, type EventKind as StoredKind } from "../storage/records";
import { Name, Timestamp, Uuid } from "../wire/schemas";
import { isoShapePattern } from "../wire/time";

/** Audit event kinds (spec part 6, plus UPDATE): the list lives in storage/records.ts. */
export const EventKind = EventRecord.properties.event;
export type EventKind = StoredKind;
export type { EventRecord } from "../storage/records";
/** The kinds a store answer can report for a memory it wrote. */
export const storedKinds = ["ADD", "MERGE", "REPLACE"] as const satisfies readonly EventKind[];

/** In a JSON body a limit must be a number (Elysia's t.Integer would also take "10"). */
const BodyLimit = (max: number, def: number) => Type.Integer({ minimum: 1, maximum: max, default: def });

/**
 * An audit record as the events endpoint returns it (spec 2.6, plus actorKeyId): the event
 * record's fields (storage/records.ts), its seq as `id` and its times in ISO 8601.
 */
export const AuditEvent = t.Object({
  id: t.String(),
  ...t.Pick(EventRecord, [
    "memoryId",
    "namespace",
    "entity",
    "event",
    "oldContent",
    "newContent",
    "mergedFromId",
    "reason",
  ]).properties,
  createdAt: Timestamp,
  ...t.Pick(EventRecord, ["actorKeyId"]).properties,
  observedAt: t.Nullable(
    t.String({
      description:
        "ISO 8601 UTC: the memory's observed time after the event (for DELETE: the deleted memory's); null on events recorded before memd kept it",
    }),
  ),
  oldObservedAt: t.Nullable(
    t.String({
      description: "the old side's observed time: the replaced memory's (REPLACE), or the one an edit changed",
    }),
  ),
  // Fields of newer events, present only where they apply, so that older events keep their shape.
  revertOf: t.Optional(
    t.String({
      description:
        "only on the events of a revert (the id of the event whose state it brought back) or a restore (the ISO 8601 instant it went back to)",
    }),
  ),
  mergedIds: t.Optional(
    t.Array(t.String(), { description: "only on a consolidation's MERGE: the memories merged into this one" }),
  ),
  mergedInto: t.Optional(
    t.String({ description: "only on a consolidation's DELETE: the memory this one was merged into" }),
  ),
});
export type AuditEvent = typeof AuditEvent.static;

export const EventsQuery = t.Object(
  {
    namespace: t.Optional(Name),
    entity: t.Optional(Name),
    memoryId: t.Optional(Uuid),
    limit: t.Optional(LimitParam(limits.pageMax, limits.eventsDefault)),
  },
  { additionalProperties: false },
);
export type EventsQuery = typeof EventsQuery.static;

const sinceText = "ISO 8601; changes strictly after it; null or absent: from the beginning";

export const DiffRequest = t.Object(
  {
    namespace: Name,
    entity: t.Optional(Name),
    // null (an answer's own `since`, sent back) means from the beginning, as absent does.
    since: t.Optional(
      t.Nullable(t.String({ maxLength: 64, pattern: isoShapePattern, description: sinceText }), {
        description: sinceText,
      }),
    ),
    limit: t.Optional(BodyLimit(limits.pageMax, limits.diffDefault)),
  },
  { additionalProperties: false },
);
export type DiffRequest = typeof DiffRequest.static;

export const DiffCreated = t.Object({
  id: t.String(),
  content: t.String(),
  category: t.String(),
  createdAt: t.String(),
});
export const DiffUpdated = t.Object({
  id: t.String(),
  content: t.String(),
  previousContent: t.String(),
  category: t.String(),
  updatedAt: t.String(),
});
export const DiffDeleted = t.Object({
  id: t.String(),
  content: t.Nullable(t.String(), { description: "null when the memory was erased (reason erased)" }),
  category: t.String(),
  deletedAt: t.String(),
  reason: t.Nullable(t.String()),
});
export const DiffReplaced = t.Object({
  oldId: t.String(),
  oldContent: t.String(),
  newId: t.String(),
  newContent: t.String(),
  category: t.String(),
  reason: t.String(),
  replacedAt: t.String(),
});

export const DiffResponse = t.Object({
  created: t.Array(DiffCreated),
  updated: t.Array(DiffUpdated),
  deleted: t.Array(DiffDeleted),
  replaced: t.Array(DiffReplaced),
  since: t.Nullable(t.String()),
  changeCount: t.Integer(),
  summary: t.String(),
  hasMore: t.Boolean(),
  nextSince: t.Nullable(t.String()),
});
export type DiffResponse = typeof DiffResponse.static;

export const StreamQuery = t.Object(
  {
    namespace: Name,
    entity: t.Optional(Name),
    after: t.Optional(t.String({ maxLength: 128, description: "a cursor (an event's `id:`); events after it" })),
    since: t.Optional(
      t.String({ maxLength: 64, pattern: isoShapePattern, description: "ISO 8601; events strictly after it" }),
    ),
  },
  { additionalProperties: false },
);
export type StreamQuery = typeof StreamQuery.static;
