// The records every storage backend keeps, each defined once as a TypeBox schema: its TypeScript
// type is the schema's Static, the export format's lines are these schemas with a `type`
// (transfer/model.ts), PostgreSQL's rows map the same field lists (postgres/rows.ts), LMDB shares
// their field names (lmdb/env.ts), the public answers take their fields from them
// (memory/model.ts `Memory`: every field but `state`, times in ISO 8601), and the code that
// copies a memory's fields (storage/ops.ts, storage/asof.ts, memory/service.ts `toMemory`) goes
// through the field lists below. So a field added to MemoryRecord is one change here (plus, on
// PostgreSQL, the migration that adds its column). The schemas also say what a valid record is
// (names, tags, ids in lower case): an import checks each line against them. Storage knows
// nothing of HTTP or of the features.
import { OptionalKind, type Static, type TSchema, Type } from "@sinclair/typebox";
import { limits } from "../config/limits";
import { Category, Importance, lowerUuidPattern, MemoryKey, Name, oneOf, Tags } from "../wire/schemas";

/** Audit event kinds: the interface's six, plus UPDATE (an edit in place, memd's extension). Persisted as these strings. */
export const eventKinds = ["ADD", "MERGE", "REPLACE", "DELETE", "SKIP_DUPLICATE", "KEEP_EXISTING", "UPDATE"] as const;
export type EventKind = (typeof eventKinds)[number];

/** Ids as memd writes them, in lower case: an id in another case would be a second id on LMDB. */
const Id = Type.String({ pattern: lowerUuidPattern });
/** A time: milliseconds since the epoch (JavaScript's Date range). */
const Ms = Type.Integer({ minimum: 0, maximum: 8.64e15 });
const Metadata = Type.Record(Type.String(), Type.Unknown());
const Nullable = <T extends TSchema>(s: T) => Type.Union([s, Type.Null()]);

export const memoryStates = ["current", "deleted", "replaced"] as const;
export type MemoryState = (typeof memoryStates)[number];

/** What is stored per memory. Records stay after deletion, with their state, for id lookups. */
export const MemoryRecord = Type.Object({
  id: Id,
  namespace: Name,
  entity: Name,
  content: Type.String(),
  category: Category,
  importance: Importance,
  tags: Type.Optional(Tags),
  metadata: Type.Optional(Metadata),
  source: Type.Optional(Type.String({ maxLength: limits.sourceChars })),
  createdAt: Ms,
  updatedAt: Ms,
  expiresAt: Type.Optional(Ms),
  state: oneOf(memoryStates),
  // When the fact was stated or observed (valid time); set by every write since format 7 /
  // schema 5. Absent on older records: it is then `createdAt` (observedOf).
  observedAt: Type.Optional(Ms),
  // A keyed fact's key (issue 33; format 8 / schema 9): set when the memory is added and never
  // changed, so an event needs not carry it. At most one current memory holds a (namespace,
  // entity, key); deleting, replacing or erasing the memory frees it.
  key: Type.Optional(MemoryKey),
});
export type MemoryRecord = Static<typeof MemoryRecord>;

/** A memory's times (ms since the epoch), each with its own rule: set by the event clock, or derived. */
export const memoryTimes = ["createdAt", "updatedAt", "expiresAt", "observedAt"] as const;

/**
 * A memory's optional fields that are kept and answered as given (no time, no state): tags,
 * metadata, source, and any field added later. Copied by name wherever a record is made.
 */
export const memoryExtras = Object.entries(MemoryRecord.properties)
  .filter(([k, s]) => s[OptionalKind] === "Optional" && !(memoryTimes as readonly string[]).includes(k))
  .map(([k]) => k) as (keyof MemoryRecord)[];

/**
 * The memory fields every event carries as the memory's state after it (EventRecord), so that the
 * trail alone replays them (as-of reads): the ones an edit may change. The others come from the
 * record (fixed at creation, as `source`) or are the event's own (content, category).
 */
export const eventState = ["importance", "tags", "metadata", "expiresAt", "observedAt"] as const;

/** A memory's observed time: its own, or its creation time for records written before observedAt existed. */
export const observedOf = (r: MemoryRecord): number => r.observedAt ?? r.createdAt;

/** What is stored per event. `category` is kept for diff items; `atMs` is unique per namespace. */
export const EventRecord = Type.Object({
  seq: Type.Integer({ minimum: 1 }),
  namespace: Name,
  entity: Name,
  memoryId: Id,
  event: oneOf(eventKinds),
  oldContent: Nullable(Type.String()),
  newContent: Nullable(Type.String()),
  mergedFromId: Nullable(Id),
  reason: Nullable(Type.String()),
  category: Type.String(),
  atMs: Ms,
  actorKeyId: Nullable(Type.String()),
  // The memory's state after the event (the new side: `memoryId`'s): its `eventState` fields, so
  // that the trail alone replays every field (as-of reads, storage/asof.ts). Written by every
  // event since format 7 / schema 5: `importance` is set on every ADD, UPDATE, MERGE and
  // REPLACE, and its absence marks an older event, which carries only content and category.
  // `observedAt` is on every new event (for DELETE, SKIP_DUPLICATE and KEEP_EXISTING: the target's).
  ...Type.Partial(Type.Pick(MemoryRecord, eventState)).properties,
  // The old side's observed time: the replaced memory's (REPLACE), or the one an edit changed (UPDATE, MERGE).
  oldObservedAt: Type.Optional(Ms),
  // Set on the events of a revert or a restore (issue 33; schema 11): the id (seq, as text) of the
  // event whose state a revert brought back, or the ISO 8601 instant a restore went back to.
  revertOf: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })),
  // A consolidation's (issue 33; schema 12): on its MERGE, the memories merged into the memory;
  // on the DELETE of each of those, the memory it went into.
  mergedIds: Type.Optional(Type.Array(Id)),
  mergedInto: Type.Optional(Id),
});
export type EventRecord = Static<typeof EventRecord>;

export const permissions = ["read", "read_write", "admin"] as const;
export type Permission = (typeof permissions)[number];

/** What is stored per API key: the SHA-256 of the secret, never the secret. */
export const KeyRecord = Type.Object({
  id: Type.String({ minLength: 1, maxLength: 64 }),
  name: Name,
  permission: oneOf(permissions),
  namespaces: Type.Array(Type.String({ minLength: 1 }), { minItems: 1 }),
  expiresAt: Nullable(Ms),
  createdAt: Ms,
  lastUsedAt: Nullable(Ms),
  revokedAt: Nullable(Ms),
  hash: Type.String({ pattern: "^[0-9a-f]{64}$" }),
});
export type KeyRecord = Static<typeof KeyRecord>;

/** Whether a memory is visible to reads at `now`: not deleted, replaced or past its expiry. */
export const isCurrent = (r: MemoryRecord | undefined, now: number): r is MemoryRecord =>
  r !== undefined && r.state === "current" && (r.expiresAt === undefined || r.expiresAt > now);

/**
 * The record of an erasure (POST /v1/memory/erase): who erased which entity, when, and how many
 * memory records lost their content. It holds no content, so it stays in the audit trail.
 */
export const ErasureRecord = Type.Object({
  namespace: Name,
  entity: Name,
  atMs: Ms,
  actorKeyId: Nullable(Type.String()),
  memories: Type.Integer({ minimum: 0, description: "memory records scrubbed, current or not" }),
  events: Type.Integer({
    minimum: 0,
    description: "audit events scrubbed, the erasure's own DELETE events included",
  }),
});
export type ErasureRecord = Static<typeof ErasureRecord>;

/** One line of an export (memd export, GET /v1/export), after its header: a record and its kind. */
export type ExportRecord =
  | ({ type: "memory" } & MemoryRecord)
  | ({ type: "event" } & EventRecord)
  | ({ type: "key" } & KeyRecord)
  | ({ type: "erasure" } & ErasureRecord);

/** A stored answer for an Idempotency-Key: pending while the first request runs, then its answer. */
export const IdempotencyEntry = Type.Object({
  keyId: Type.String(),
  key: Type.String(),
  /** SHA-256 of method, path and body: the same key with another request is refused. */
  hash: Type.String(),
  state: Type.Union([Type.Literal("pending"), Type.Literal("done")]),
  status: Type.Optional(Type.Integer()),
  body: Type.Optional(Type.String()),
  createdAt: Ms,
  expiresAt: Ms,
});
export type IdempotencyEntry = Static<typeof IdempotencyEntry>;

/** The records kept, by the `type` an export line gives them. */
export const recordSchemas = {
  memory: MemoryRecord,
  event: EventRecord,
  key: KeyRecord,
  erasure: ErasureRecord,
};

// ---- Webhooks (issue 34) ----------------------------------------------------------------------

export const webhookStates = ["active", "paused", "disabled"] as const;
export type WebhookState = (typeof webhookStates)[number];

/**
 * A webhook subscription. `cursor` is the seq of the last event of the trail it is past
 * (delivered with a 2xx, or not matching): delivery goes on from the next one. The signing
 * secret is kept as it is (HMAC needs it); it is shown once, when made or rotated.
 */
export const WebhookRecord = Type.Object({
  id: Type.String({ minLength: 1, maxLength: 64 }),
  url: Type.String({ minLength: 1, maxLength: 2048 }),
  /** Namespace patterns, as keys have them (`*`, a name, `prefix/*`). */
  namespaces: Type.Array(Type.String({ minLength: 1 }), { minItems: 1 }),
  /** Event kinds delivered (every kind when made without a list). */
  events: Type.Array(oneOf(eventKinds)),
  description: Nullable(Type.String()),
  secret: Type.String(),
  /** The secret before the last rotation, still signing until `previousSecretUntil`. */
  previousSecret: Nullable(Type.String()),
  previousSecretUntil: Nullable(Ms),
  /** The key that made it: what it may deliver is what that key may read. */
  createdBy: Type.String(),
  createdAt: Ms,
  updatedAt: Ms,
  state: oneOf(webhookStates),
  stateReason: Nullable(Type.String()),
  cursor: Type.Integer({ minimum: 0 }),
  /** Bumped by every change made through the API (not by delivery): a deliverer sees its plan is stale. */
  rev: Type.Integer({ minimum: 0 }),
  /** When the event now being retried first failed; null when the last attempt succeeded. */
  failingSince: Nullable(Ms),
  lastDeliveredAt: Nullable(Ms),
  lastError: Nullable(Type.String()),
});
export type WebhookRecord = Static<typeof WebhookRecord>;

/** One delivery attempt, as GET /v1/webhooks/{id}/deliveries lists it (no payload: it could hold erased content). */
export const DeliveryRecord = Type.Object({
  webhookId: Type.String(),
  /** The event's seq, and the webhook-id header sent with it. */
  seq: Type.Integer({ minimum: 1 }),
  messageId: Type.String(),
  eventKind: Type.String(),
  namespace: Type.String(),
  atMs: Ms,
  /** 1 for the first attempt of this event, counting up while it fails. */
  attempt: Type.Integer({ minimum: 1 }),
  /** The receiver's HTTP status, or null when none came (refused, timed out, unreachable). */
  status: Nullable(Type.Integer()),
  ok: Type.Boolean(),
  error: Nullable(Type.String()),
  durationMs: Type.Number({ minimum: 0 }),
});
export type DeliveryRecord = Static<typeof DeliveryRecord>;
