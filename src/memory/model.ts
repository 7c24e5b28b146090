import { t } from "elysia";
import { storedKinds } from "../audit/model";
import { limits } from "../config/limits";
import { LimitParam } from "../http/query";
import { ErasureRecord, type EventKind, MemoryRecord, memoryTimes } from "../storage/records";
import { Category, EntityPrefix, Importance, MemoryKey, Name, Tag, Tags, Timestamp } from "../wire/schemas";
import { isoShapePattern } from "../wire/time";

const Metadata = t.Record(t.String(), t.Unknown(), { description: "a JSON object, at most 16 KiB serialized" });
const Source = t.String({ minLength: 1, maxLength: limits.sourceChars });

/** An ISO 8601 instant in a request; its value is checked by the handler (wire/time.ts). */
const Instant = (description: string) => t.String({ maxLength: 64, pattern: isoShapePattern, description });
const observedText =
  "ISO 8601: when the fact was stated or observed (default: the time it is stored); not in the future (5 minutes of clock skew allowed), not before 1970";
export const ObservedAt = Instant(observedText);
const asOfText =
  "ISO 8601: answer as memd knew it at that instant, replayed from the audit trail; not in the future. See docs/time.md";
export const AsOf = Instant(asOfText);
export const ObservedAfter = Instant("ISO 8601: only memories observed at or after it");
export const ObservedBefore = Instant("ISO 8601: only memories observed strictly before it");

export const defaultCategory = "general";
export const defaultImportance = 0.5;
export const maxMetadataBytes = limits.metadataBytes;

export const StoreRequest = t.Object(
  {
    namespace: Name,
    entity: Name,
    content: t.String({ minLength: 1, pattern: "\\S", description: "non-empty after trimming" }),
    infer: t.Optional(t.Boolean({ default: true })),
    tags: t.Optional(Tags),
    metadata: t.Optional(Metadata),
    source: t.Optional(Source),
    ttl: t.Optional(t.Number({ exclusiveMinimum: 0, maximum: 100 * 365 * 86400, description: "seconds" })),
    category: t.Optional(Category),
    importance: t.Optional(Importance),
    observedAt: t.Optional(ObservedAt),
    includeKeyed: t.Optional(
      t.Boolean({
        description:
          "smart store only: also compare with keyed facts, which it may then skip, update, merge or replace (default false: keyed facts are left alone)",
      }),
    ),
    key: t.Optional(
      t.String({
        ...MemoryKey,
        description:
          "a keyed fact (stored verbatim, as infer: false): at most one current memory per (namespace, entity, key); storing with the key of a current memory updates that memory in place (same id, event UPDATE), and storing what it already holds changes nothing (unchanged: 1)",
      }),
    ),
  },
  { additionalProperties: false },
);
export type StoreRequest = typeof StoreRequest.static;

export const StoredEvent = t.Union(
  [...storedKinds, "UPDATE" as const].map((k) => t.Literal(k)),
  {
    description: "the event that wrote it: UPDATE when a keyed store changed the memory holding its key",
  },
);

/**
 * A memory as answers give it: every field of the record (storage/records.ts) but its state (an
 * answer shows only what is current, or what was at asOf), its times in ISO 8601, and the event
 * that wrote it when a store answers. A field added to the record is answered as it is.
 */
export const Memory = t.Object({
  ...t.Omit(MemoryRecord, ["state", ...memoryTimes]).properties,
  createdAt: Timestamp,
  updatedAt: t.Optional(Timestamp),
  expiresAt: t.Optional(Timestamp),
  observedAt: t.String({
    description: "ISO 8601 UTC: when the fact was stated or observed (valid time); see docs/time.md",
  }),
  event: t.Optional(StoredEvent),
});
export type Memory = typeof Memory.static;

export const StoreResponse = t.Object({
  memories: t.Array(Memory),
  skipped: t.Integer({ minimum: 0 }),
  conflicts: t.Integer({ minimum: 0 }),
  unchanged: t.Optional(
    t.Integer({
      minimum: 0,
      description:
        "keyed stores only: 1 when the memory holding the key already held exactly this (nothing written, no event; the memory is listed without `event`), else 0",
    }),
  ),
});
export type StoreResponse = typeof StoreResponse.static;

export const ListQuery = t.Object(
  {
    namespace: Name,
    entity: t.Optional(Name),
    entityPrefix: t.Optional(EntityPrefix),
    category: t.Optional(Category),
    tag: t.Optional(t.Array(Tag, { maxItems: limits.tags, description: "repeat: all must match" })),
    limit: t.Optional(LimitParam(limits.pageMax, limits.listDefault)),
    cursor: t.Optional(t.String({ minLength: 1, maxLength: 512, description: "nextCursor of the previous page" })),
    asOf: t.Optional(AsOf),
    observedAfter: t.Optional(ObservedAfter),
    observedBefore: t.Optional(ObservedBefore),
    key: t.Optional(
      t.String({ ...MemoryKey, description: "the memory holding this key (needs entity): a page of 0 or 1 memories" }),
    ),
  },
  { additionalProperties: false },
);
export type ListQuery = typeof ListQuery.static;

export const ListResponse = t.Object({
  memories: t.Array(Memory),
  nextCursor: t.Nullable(t.String({ description: "opaque; pass as cursor for the next page; null at the end" })),
});
export type ListResponse = typeof ListResponse.static;

export const PatchRequest = t.Object(
  {
    content: t.Optional(t.String({ minLength: 1, pattern: "\\S", description: "non-empty after trimming" })),
    category: t.Optional(Category),
    importance: t.Optional(Importance),
    tags: t.Optional(t.Nullable(Tags, { description: "null removes the tags" })),
    metadata: t.Optional(t.Nullable(Metadata, { description: "null removes the metadata" })),
    observedAt: t.Optional(ObservedAt),
  },
  { additionalProperties: false },
);
export type PatchRequest = typeof PatchRequest.static;

export const EntityQuery = t.Object({ namespace: Name, entity: Name }, { additionalProperties: false });
export type EntityQuery = typeof EntityQuery.static;

export const EraseRequest = t.Object({ namespace: Name, entity: Name }, { additionalProperties: false });
export type EraseRequest = typeof EraseRequest.static;

/** An erasure as answers give it: the record (storage/records.ts) with its time in ISO 8601. */
export const Erasure = t.Object({
  ...t.Pick(ErasureRecord, ["namespace", "entity"]).properties,
  erasedAt: Timestamp,
  ...t.Pick(ErasureRecord, ["actorKeyId", "memories", "events"]).properties,
});
export type Erasure = typeof Erasure.static;

export const ErasuresQuery = t.Object({ namespace: Name, entity: t.Optional(Name) }, { additionalProperties: false });

/** Any string: an id that is not a UUID answers 404 (see isUuid), not a validation error. */
export const MemoryParams = t.Object({ id: t.String() });

export const GetQuery = t.Object({ asOf: t.Optional(AsOf) }, { additionalProperties: false });

export type { MemoryRecord } from "../storage/records";

/**
 * What a smart store did, change by change, as written (extraction/reconcile.ts makes them): for
 * callers that answer more than memd's StoreResponse (mem0's add). Every event kind but UPDATE,
 * which only an edit writes. Declared here, below extraction/, so that the store route can take
 * an observer without naming the extraction's types.
 */
export type AppliedChange = { kind: Exclude<EventKind, "UPDATE">; memory: MemoryRecord };
export type ObserveChanges = (applied: AppliedChange[]) => void;

/** The Idempotency-Key header as the OpenAPI document describes it, on every route that takes it. */
export const idempotencyHeader = {
  parameters: [
    {
      name: "Idempotency-Key",
      in: "header" as const,
      required: false,
      schema: { type: "string" as const, minLength: 1, maxLength: 255 },
      description: "a repeat within 24 h with the same body gets the first answer (header idempotent-replayed: true)",
    },
  ],
};
