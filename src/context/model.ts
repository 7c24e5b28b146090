import { Type } from "@sinclair/typebox";
import { t } from "elysia";
import { AsOf, ObservedAfter, ObservedBefore } from "../memory/model";
import { SearchResult, searchModes } from "../search/model";
import { Category, Name } from "../wire/schemas";

/** The budget's bounds, in tokens of the named tokenizer (`tokenizer` in the answer). */
export const contextTokens = { min: 50, max: 20000, default: 1000 } as const;
/** At most this many categories in one request. */
export const maxContextCategories = 20;

export const ContextRequest = t.Object(
  {
    namespace: Name,
    entity: Name,
    // Characters, not UTF-16 units: the length is checked by the handler, as search does.
    query: t.Optional(
      t.String({
        minLength: 1,
        pattern: "\\S",
        description:
          "1 to 1000 characters, not blank: the search's best hits for it; absent: the most important and most recent memories",
      }),
    ),
    // In a JSON body a number (Elysia's t.Integer would also take "1000").
    maxTokens: t.Optional(
      Type.Integer({
        minimum: contextTokens.min,
        maximum: contextTokens.max,
        default: contextTokens.default,
        description: `the most tokens (cl100k_base) the context may take; ${contextTokens.min} to ${contextTokens.max}, default ${contextTokens.default}`,
      }),
    ),
    categories: t.Optional(
      t.Array(Category, {
        minItems: 1,
        maxItems: maxContextCategories,
        description: "only memories of these categories",
      }),
    ),
    asOf: t.Optional(AsOf),
    observedAfter: t.Optional(ObservedAfter),
    observedBefore: t.Optional(ObservedBefore),
  },
  { additionalProperties: false },
);
export type ContextRequest = typeof ContextRequest.static;

export const ContextResponse = t.Object({
  context: t.String({
    description:
      "the memories as text for a prompt: grouped by category (## category), each line '- [YYYY-MM-DD] content' with the date the fact was observed (UTC); empty when none",
  }),
  memories: t.Array(SearchResult, { description: "the memories in the context, in the order they appear" }),
  tokens: t.Integer({ minimum: 0, description: "tokens of context, by tokenizer; never more than maxTokens" }),
  tokenizer: t.Literal("cl100k_base"),
  truncated: t.Boolean({ description: "true when some memory that qualified did not fit in maxTokens" }),
  mode: t.Union([...searchModes.map((m) => t.Literal(m)), t.Literal("importance")], {
    description: "how the memories were picked: the search mode used for query, else importance",
  }),
});
export type ContextResponse = typeof ContextResponse.static;
