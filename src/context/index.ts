import { Elysia } from "elysia";
import type { Core } from "../core";
import { withEmbedCost } from "../embedding/client";
import type { auth } from "../keys/auth";
import { withRerankCost } from "../search/rerank";
import { jsonAnswer } from "../wire/schemas";
import { ContextRequest, ContextResponse } from "./model";
import { buildContext } from "./service";

/** Routes of the context feature: POST /v1/memory/context. */
export const contextRoutes = (core: Core, authPlugin: ReturnType<typeof auth>) =>
  new Elysia({ name: "context" })
    .use(authPlugin)
    .post(
      "/v1/memory/context",
      ({ body, set }) =>
        withRerankCost(core, set, (reranked) => withEmbedCost(set, (cost) => buildContext(core, body, cost, reranked))),
      {
        permission: "read",
        namespace: "body",
        body: ContextRequest,
        detail: {
          summary: "The memories to put in a prompt, as text within a token budget",
          description:
            "With query: the search's best hits (the default search mode); without one, or when it finds nothing: the entity's memories by 0.5 × importance + 0.5 × recency (halving every 30 days). " +
            "Grouped by category, best group first, each line '- [YYYY-MM-DD] content'; tokens counted by cl100k_base (js-tiktoken), never more than maxTokens.",
          responses: jsonAnswer(ContextResponse),
        },
      },
    );
