import { TypeCompiler } from "@sinclair/typebox/compiler";
import { Elysia, ValidationError } from "elysia";
import { limits } from "../config/limits";
import type { Core } from "../core";
import { queryLimit } from "../http/query";
import { type auth, checkScope } from "../keys/auth";
import type { KeyRecord } from "../keys/model";
import { jsonAnswer } from "../wire/schemas";
import { EntitiesQuery, EntitiesResponse, NamespacesQuery, NamespacesResponse } from "./model";
import { listEntities, listNamespaces } from "./service";

/** GET /v1/entities: a page of a namespace's entities. */
function entitiesPage(core: Core, query: EntitiesQuery) {
  const limit = queryLimit(query.limit, limits.pageMax, limits.listDefault);
  return listEntities(core.storage, query.namespace, limit, query.cursor, query.prefix);
}

const entitiesQuery = TypeCompiler.Compile(EntitiesQuery);

/**
 * GET /v1/entities for a route that shares its path: mem0's GET /v1/entities/ (src/mem0), which
 * Elysia's router cannot tell from this one (a trailing slash matches either), answers memd's
 * calls without the slash through this, with the query checked as this feature's route checks it.
 */
export function browseEntities(core: Core, apiKey: KeyRecord, query: unknown) {
  if (!entitiesQuery.Check(query)) throw new ValidationError("query", entitiesQuery, query);
  checkScope(apiKey, query.namespace);
  return entitiesPage(core, query);
}

/** Read routes for browsing (the web page at /ui uses them): namespaces, then their entities. */
export const browseRoutes = (core: Core, authPlugin: ReturnType<typeof auth>) =>
  new Elysia({ name: "browse" })
    .use(authPlugin)
    .get(
      "/v1/namespaces",
      ({ query, apiKey }) =>
        listNamespaces(core.storage, apiKey, queryLimit(query.limit, limits.pageMax, limits.listDefault), query.cursor),
      {
        permission: "read",
        query: NamespacesQuery,
        detail: {
          summary: "Namespaces the key covers that hold data",
          description: "In name order (UTF-8 bytes), paged with limit and nextCursor.",
          responses: jsonAnswer(NamespacesResponse),
        },
      },
    )
    .get("/v1/entities", ({ query }) => entitiesPage(core, query), {
      permission: "read",
      namespace: "query",
      query: EntitiesQuery,
      detail: {
        summary: "Entities of a namespace, with memory counts and last change",
        description:
          "Every entity that has events (one whose memories were all deleted shows 0), in the backend's name order, paged with limit and nextCursor.",
        responses: jsonAnswer(EntitiesResponse),
      },
    });
