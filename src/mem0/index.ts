import { Elysia } from "elysia";
import { browseEntities } from "../browse/index";
import type { Core } from "../core";
import type { auth } from "../keys/auth";
import type { KeyRecord } from "../keys/model";
import type { SmartStore } from "../memory/index";
import { ApiError } from "../wire/errors";
import {
  AddRequest,
  EntityQuery,
  ListRequest,
  MemoryParams,
  namespaceHeader,
  PageQuery,
  SearchRequest,
  UpdateRequest,
} from "./model";
import {
  addMem0,
  deleteAllMem0,
  deleteEntityMem0,
  deleteMem0,
  entitiesMem0,
  getMem0,
  historyMem0,
  listByIds,
  listMem0,
  namespaceOf,
  pingMem0,
  searchMem0,
  updateMem0,
} from "./service";

export { isMem0Path, mem0ErrorBody } from "./service";

const unavailable: SmartStore = async () => {
  throw new ApiError("extraction_unavailable", "smart store (infer: true) is not available; send infer: false");
};

/**
 * mem0's REST API (the paths and shapes its official clients use), over memd's own services:
 * authentication, permissions and namespace scopes are memd's (the `permission` macro, and the
 * key must cover the namespace), and every write is an ordinary memd change with the key as
 * actor. Errors take mem0's shape through the app's error handler (see isMem0Path).
 *
 * Must be used before the browse feature: GET /v1/entities/ and memd's GET /v1/entities are
 * one route to Elysia's router, and this one answers both (memd's through browseEntities).
 */
export const mem0Routes = (core: Core, authPlugin: ReturnType<typeof auth>, smartStore: SmartStore = unavailable) => {
  const ns = (key: KeyRecord, request: Request) =>
    namespaceOf(key, request.headers.get(namespaceHeader), core.config.mem0Namespace);
  return (
    new Elysia({ name: "mem0" })
      .use(authPlugin)
      .get(
        "/v1/ping/",
        ({ apiKey, request }) => {
          let namespace: string | undefined;
          try {
            namespace = ns(apiKey, request);
          } catch {
            namespace = undefined; // the clients ping on start: a call that names no namespace yet still works
          }
          return pingMem0(apiKey, namespace);
        },
        { permission: "read" },
      )
      .post(
        "/v1/memories/",
        ({ body, apiKey, request, set }) => addMem0(core, smartStore, apiKey, ns(apiKey, request), body, set),
        { permission: "read_write", body: AddRequest },
      )
      .post(
        "/v3/memories/add/",
        ({ body, apiKey, request, set }) => addMem0(core, smartStore, apiKey, ns(apiKey, request), body, set),
        { permission: "read_write", body: AddRequest },
      )
      .post("/v2/memories/search/", ({ body, apiKey, request }) => searchMem0(core, ns(apiKey, request), body), {
        permission: "read",
        body: SearchRequest,
      })
      // Older clients' search (version v1), ids at the top level.
      .post("/v1/memories/search/", ({ body, apiKey, request }) => searchMem0(core, ns(apiKey, request), body), {
        permission: "read",
        body: SearchRequest,
      })
      .post("/v3/memories/search/", ({ body, apiKey, request }) => searchMem0(core, ns(apiKey, request), body), {
        permission: "read",
        body: SearchRequest,
      })
      .post(
        "/v2/memories/",
        ({ body, query, apiKey, request }) => listMem0(core, ns(apiKey, request), body, query, new URL(request.url)),
        { permission: "read", body: ListRequest, query: PageQuery },
      )
      .post(
        "/v3/memories/",
        ({ body, query, apiKey, request }) => listMem0(core, ns(apiKey, request), body, query, new URL(request.url)),
        { permission: "read", body: ListRequest, query: PageQuery },
      )
      .get(
        "/v1/memories/",
        ({ query, apiKey, request }) => listByIds(core, ns(apiKey, request), query, new URL(request.url)),
        { permission: "read", query: EntityQuery },
      )
      .delete(
        "/v1/memories/",
        ({ query, apiKey, request }) => deleteAllMem0(core, apiKey, ns(apiKey, request), query),
        {
          permission: "read_write",
          query: EntityQuery,
        },
      )
      .get("/v1/memories/:id/", ({ memory }) => getMem0(memory), {
        permission: "read",
        memory: "params.id",
        params: MemoryParams,
      })
      .put(
        "/v1/memories/:id/",
        ({ params, body, apiKey, memory }) => updateMem0(core, apiKey, params.id, memory, body),
        {
          permission: "read_write",
          memory: "params.id",
          params: MemoryParams,
          body: UpdateRequest,
        },
      )
      .delete("/v1/memories/:id/", ({ params, apiKey, memory }) => deleteMem0(core, apiKey, params.id, memory), {
        permission: "read_write",
        memory: "params.id",
        params: MemoryParams,
      })
      .get("/v1/memories/:id/history/", ({ memory }) => historyMem0(core, memory), {
        permission: "read",
        memory: "params.id",
        params: MemoryParams,
      })
      .get(
        "/v1/entities/",
        ({ query, apiKey, request }) => {
          const url = new URL(request.url);
          // Without the slash, or naming a namespace (mem0's clients never do), it is memd's own GET /v1/entities.
          if (!url.pathname.endsWith("/") || url.searchParams.has("namespace"))
            return browseEntities(core, apiKey, query);
          return entitiesMem0(core, ns(apiKey, request), query, url);
        },
        { permission: "read" },
      )
      .delete(
        "/v2/entities/:type/:name/",
        ({ params, apiKey, request }) => deleteEntityMem0(core, apiKey, ns(apiKey, request), params.type, params.name),
        { permission: "read_write" },
      )
      .delete(
        "/v1/entities/:type/:name/",
        ({ params, apiKey, request }) => deleteEntityMem0(core, apiKey, ns(apiKey, request), params.type, params.name),
        { permission: "read_write" },
      )
  );
};
