import { Type } from "@sinclair/typebox";
import { t } from "elysia";
import { limits } from "../config/limits";
import { AsOf, Memory, ObservedAfter, ObservedBefore } from "../memory/model";
import { Category, EntityPrefix, Name, Tag } from "../wire/schemas";

export const searchModes = ["keyword", "semantic", "hybrid"] as const;
export type SearchMode = (typeof searchModes)[number];

export const SearchRequest = t.Object(
  {
    namespace: Name,
    entity: t.Optional(Name),
    entityPrefix: t.Optional(EntityPrefix),
    // Characters, not UTF-16 units: the length is checked by search() (an emoji is one character).
    query: t.String({ minLength: 1, pattern: "\\S", description: "1 to 1000 characters, not blank" }),
    // In a JSON body a limit must be a number (Elysia's t.Integer would also take "10").
    limit: t.Optional(Type.Integer({ minimum: 1, maximum: 100, default: 10 })),
    mode: t.Optional(
      t.Union(
        searchModes.map((m) => t.Literal(m)),
        { description: "default: hybrid when an embedding model is configured, else keyword" },
      ),
    ),
    category: t.Optional(Category),
    tags: t.Optional(t.Array(Tag, { maxItems: limits.tags })),
    asOf: t.Optional(AsOf),
    observedAfter: t.Optional(ObservedAfter),
    observedBefore: t.Optional(ObservedBefore),
  },
  { additionalProperties: false },
);
export type SearchRequest = typeof SearchRequest.static;

export const SearchResult = t.Composite([
  t.Omit(Memory, ["event"]),
  t.Object({ score: t.Number({ description: "higher is better" }) }),
]);
export type SearchResult = typeof SearchResult.static;

export const SearchResponse = t.Object({
  results: t.Array(SearchResult),
  mode: t.Union(searchModes.map((m) => t.Literal(m))),
});
export type SearchResponse = typeof SearchResponse.static;
