// The export format: JSON Lines, a header line then one record per line. Records are the
// storage records as they are (times in milliseconds since the epoch, ids kept), each with a
// `type`. Written by `memd export` and GET /v1/export, read by `memd import`.
import { Type } from "@sinclair/typebox";
import { TypeCompiler } from "@sinclair/typebox/compiler";
import { limits } from "../config/limits";
import { Category, Tag } from "../memory/model";
import { eventKinds, permissions } from "../storage/records";
import { lowerUuidPattern, Name } from "../wire/schemas";

/**
 * The version of the export format this memd writes. 2: memories' observedAt, and events that
 * carry the memory's state after them (importance, tags, metadata, expiresAt, observedAt,
 * oldObservedAt). An import reads these versions and refuses others; a format 1 file has none of
 * the new fields, and its records then read as records written before they existed (docs/time.md).
 */
export const EXPORT_FORMAT = 2;
export const IMPORT_FORMATS: readonly number[] = [1, 2];

// Ids in lower case, as memd writes them: an id in another case would be a second id on LMDB.
const uuid = Type.String({ pattern: lowerUuidPattern });
const name = Name;
const ms = Type.Integer({ minimum: 0, maximum: 8.64e15 });
const nullable = <T extends ReturnType<typeof Type.String>>(s: T) => Type.Union([s, Type.Null()]);

export const Header = Type.Object({
  type: Type.Literal("header"),
  format: Type.Integer(),
  memd: Type.String(),
  exportedAt: Type.String(),
  namespaces: Type.Union([Type.Array(Type.String()), Type.Null()]),
  keys: Type.Boolean(),
});
export type Header = typeof Header.static;

const MemoryLine = Type.Object(
  {
    type: Type.Literal("memory"),
    id: uuid,
    namespace: name,
    entity: name,
    content: Type.String(),
    category: Category,
    importance: Type.Number({ minimum: 0, maximum: 1 }),
    tags: Type.Optional(Type.Array(Tag, { maxItems: limits.tags })),
    metadata: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
    source: Type.Optional(Type.String({ maxLength: limits.sourceChars })),
    createdAt: ms,
    updatedAt: ms,
    expiresAt: Type.Optional(ms),
    state: Type.Union([Type.Literal("current"), Type.Literal("deleted"), Type.Literal("replaced")]),
    observedAt: Type.Optional(ms),
  },
  { additionalProperties: false },
);

const EventLine = Type.Object(
  {
    type: Type.Literal("event"),
    seq: Type.Integer({ minimum: 1 }),
    namespace: name,
    entity: name,
    memoryId: uuid,
    event: Type.Union(eventKinds.map((k) => Type.Literal(k))),
    oldContent: nullable(Type.String()),
    newContent: nullable(Type.String()),
    mergedFromId: nullable(uuid),
    reason: nullable(Type.String()),
    category: Type.String(),
    atMs: ms,
    actorKeyId: nullable(Type.String()),
    importance: Type.Optional(Type.Number({ minimum: 0, maximum: 1 })),
    tags: Type.Optional(Type.Array(Tag, { maxItems: limits.tags })),
    metadata: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
    expiresAt: Type.Optional(ms),
    observedAt: Type.Optional(ms),
    oldObservedAt: Type.Optional(ms),
  },
  { additionalProperties: false },
);

const KeyLine = Type.Object(
  {
    type: Type.Literal("key"),
    id: Type.String({ minLength: 1, maxLength: 64 }),
    name: Name,
    permission: Type.Union(permissions.map((p) => Type.Literal(p))),
    namespaces: Type.Array(Type.String({ minLength: 1 }), { minItems: 1 }),
    expiresAt: Type.Union([ms, Type.Null()]),
    createdAt: ms,
    lastUsedAt: Type.Union([ms, Type.Null()]),
    revokedAt: Type.Union([ms, Type.Null()]),
    hash: Type.String({ pattern: "^[0-9a-f]{64}$" }),
  },
  { additionalProperties: false },
);

const ErasureLine = Type.Object(
  {
    type: Type.Literal("erasure"),
    namespace: name,
    entity: name,
    atMs: ms,
    actorKeyId: nullable(Type.String()),
    memories: Type.Integer({ minimum: 0 }),
    events: Type.Integer({ minimum: 0 }),
  },
  { additionalProperties: false },
);

export const checkHeader = TypeCompiler.Compile(Header);
export const lineCheckers = {
  memory: TypeCompiler.Compile(MemoryLine),
  event: TypeCompiler.Compile(EventLine),
  key: TypeCompiler.Compile(KeyLine),
  erasure: TypeCompiler.Compile(ErasureLine),
};

/** Field order per record type: every export writes its lines in this order, whatever the backend. */
export const fieldOrder: Record<keyof typeof lineCheckers, string[]> = {
  memory: Object.keys(MemoryLine.properties),
  event: Object.keys(EventLine.properties),
  key: Object.keys(KeyLine.properties),
  erasure: Object.keys(ErasureLine.properties),
};
