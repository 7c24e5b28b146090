import { Type } from "@sinclair/typebox";
import { t } from "elysia";
import { limits } from "../config/limits";
import { LimitParam } from "../http/query";
import { Name, Timestamp, Uuid } from "../http/schemas";

/**
 * Audit event kinds, the one list: persisted as these strings, never as numbers. The model's
 * decisions (extraction/model.ts) are the same six words, and a stored memory's `event` is one
 * of `storedKinds`.
 */
export const eventKinds = ["ADD", "SKIP_DUPLICATE", "MERGE", "REPLACE", "KEEP_EXISTING", "DELETE"] as const;
export type EventKind = (typeof eventKinds)[number];
export const EventKind = t.Union(eventKinds.map((k) => t.Literal(k)));
/** The kinds a store answer can report for a memory it wrote. */
export const storedKinds = ["ADD", "MERGE", "REPLACE"] as const satisfies readonly EventKind[];

/** What is stored per event. `category` is kept for diff items; `atMs` is unique per namespace. */
export interface EventRecord {
  seq: number;
  namespace: string;
  entity: string;
  memoryId: string;
  event: EventKind;
  oldContent: string | null;
  newContent: string | null;
  mergedFromId: string | null;
  reason: string | null;
  category: string;
  atMs: number;
  actorKeyId: string | null;
}

/** In a JSON body a limit must be a number (Elysia's t.Integer would also take "10"). */
const BodyLimit = (max: number, def: number) => Type.Integer({ minimum: 1, maximum: max, default: def });

/** An audit record as the events endpoint returns it (spec 2.6, plus actorKeyId). */
export const AuditEvent = t.Object({
  id: t.String(),
  memoryId: Uuid,
  namespace: t.String(),
  entity: t.String(),
  event: EventKind,
  oldContent: t.Nullable(t.String()),
  newContent: t.Nullable(t.String()),
  mergedFromId: t.Nullable(t.String()),
  reason: t.Nullable(t.String()),
  createdAt: Timestamp,
  actorKeyId: t.Nullable(t.String()),
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

export const DiffRequest = t.Object(
  {
    namespace: Name,
    entity: t.Optional(Name),
    since: t.Optional(t.String({ maxLength: 64, description: "ISO 8601; changes strictly after it" })),
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
  content: t.String(),
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
