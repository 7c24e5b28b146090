import { t } from "elysia";
import { limits } from "../config/limits";
import { LimitParam } from "../http/query";
import { EntityPrefix, Name, Timestamp } from "../wire/schemas";

const Cursor = t.String({ minLength: 1, maxLength: 1024, description: "nextCursor of the previous page" });
const Limit = LimitParam(limits.pageMax, limits.listDefault);

export const NamespacesQuery = t.Object(
  { limit: t.Optional(Limit), cursor: t.Optional(Cursor) },
  { additionalProperties: false },
);
export type NamespacesQuery = typeof NamespacesQuery.static;

export const EntitiesQuery = t.Object(
  { namespace: Name, prefix: t.Optional(EntityPrefix), limit: t.Optional(Limit), cursor: t.Optional(Cursor) },
  { additionalProperties: false },
);
export type EntitiesQuery = typeof EntitiesQuery.static;

export const NamespaceInfo = t.Object({
  namespace: t.String(),
  memories: t.Integer({ minimum: 0, description: "current memories" }),
  lastEventAt: Timestamp,
});

export const NamespacesResponse = t.Object({
  namespaces: t.Array(NamespaceInfo),
  nextCursor: t.Nullable(t.String()),
});
export type NamespacesResponse = typeof NamespacesResponse.static;

export const EntityInfo = t.Object({
  entity: t.String(),
  memories: t.Integer({ minimum: 0, description: "current memories" }),
  lastChangeAt: Timestamp,
});

export const EntitiesResponse = t.Object({
  entities: t.Array(EntityInfo),
  nextCursor: t.Nullable(t.String()),
});
export type EntitiesResponse = typeof EntitiesResponse.static;
