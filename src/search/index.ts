import { Elysia } from "elysia";
import type { Core } from "../core";
import { withEmbedCost } from "../embedding/client";
import type { auth } from "../keys/auth";
import { jsonAnswer } from "../wire/schemas";
import { SearchRequest, SearchResponse } from "./model";
import { withRerankCost } from "./rerank";
import { search } from "./service";

/** Routes of the search feature: POST /v1/memory/search. */
export const searchRoutes = (core: Core, authPlugin: ReturnType<typeof auth>) =>
  new Elysia({ name: "search" })
    .use(authPlugin)
    .post(
      "/v1/memory/search",
      ({ body, set }) =>
        withRerankCost(core, set, (reranked) => withEmbedCost(set, (cost) => search(core, body, cost, reranked))),
      {
        permission: "read",
        namespace: "body",
        body: SearchRequest,
        detail: {
          summary: "Search current memories by words and by meaning",
          description:
            "mode keyword: BM25 (k1 1.2, b the spread of the scope's lengths; within an entity a hit gains half its better adjacent hit's score) over words stemmed in their text's language, a query's stop words weighing 0.35; semantic: cosine over stored embeddings; hybrid: the two lists' z-scores summed, hits standing far out of their list first (src/search/fusion.ts).",
          responses: jsonAnswer(SearchResponse),
        },
      },
    );
