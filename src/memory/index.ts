import { Elysia, t } from "elysia";
import { limits } from "../config/limits";
import type { Core } from "../core";
import { embedHeaders, newCost } from "../embedding/client";
import { ApiError } from "../http/errors";
import { queryLimit } from "../http/query";
import { isUuid, jsonAnswer } from "../http/schemas";
import type { auth } from "../keys/auth";
import { covers, requireNamespace } from "../keys/service";
import { ListQuery, Memory, MemoryParams, StoreRequest, StoreResponse } from "./model";
import { deleteMemory, findMemory, storeRaw, toMemory } from "./service";

export type SmartStore = (
  req: StoreRequest,
  actorKeyId: string,
  set: { headers: Record<string, unknown> },
) => Promise<StoreResponse>;

const unavailable: SmartStore = async () => {
  throw new ApiError("extraction_unavailable", "smart store (infer: true) is not available; send infer: false");
};

/** Routes of the memory feature: store (raw or smart), and reads of current memories. */
export const memoryRoutes = (core: Core, authPlugin: ReturnType<typeof auth>, smartStore: SmartStore = unavailable) =>
  new Elysia({ name: "memory" })
    .use(authPlugin)
    .post(
      "/v1/memory",
      async ({ body, apiKey, set }) => {
        requireNamespace(apiKey, body.namespace);
        if (body.infer !== false) return smartStore(body, apiKey.id, set);
        const cost = newCost();
        const res = await storeRaw(core, body, apiKey.id, cost);
        Object.assign(set.headers, embedHeaders(cost));
        return res;
      },
      {
        permission: "read_write",
        body: StoreRequest,
        detail: {
          summary: "Store a memory",
          description: "infer: false stores content verbatim; infer: true (default) extracts facts.",
          responses: jsonAnswer(StoreResponse),
        },
      },
    )
    .get(
      "/v1/memory",
      async ({ query, apiKey }) => {
        requireNamespace(apiKey, query.namespace);
        const limit = queryLimit(query.limit, limits.pageMax, limits.listDefault);
        const found = await core.storage.currentMemories({ namespace: query.namespace, entity: query.entity }, limit);
        return found.map((r) => toMemory(r));
      },
      {
        permission: "read",
        query: ListQuery,
        detail: { summary: "List current memories of a namespace or entity", responses: jsonAnswer(t.Array(Memory)) },
      },
    )
    .get(
      "/v1/memory/:id",
      async ({ params, apiKey }) => {
        const r = isUuid(params.id) ? await findMemory(core, params.id) : undefined;
        // A memory outside the key's namespaces answers as if it did not exist, so ids cannot be probed.
        if (!r || !covers(apiKey, r.namespace)) throw new ApiError("not_found", "no memory with that id");
        return toMemory(r);
      },
      {
        permission: "read",
        params: MemoryParams,
        detail: { summary: "Get one current memory", responses: jsonAnswer(Memory) },
      },
    )
    .delete(
      "/v1/memory/:id",
      async ({ params, apiKey }) => {
        if (!isUuid(params.id)) throw new ApiError("not_found", "no memory with that id");
        await deleteMemory(core, params.id, apiKey.id, (ns) => {
          if (!covers(apiKey, ns)) throw new ApiError("not_found", "no memory with that id");
        });
        return { deleted: true };
      },
      {
        permission: "read_write",
        params: MemoryParams,
        detail: { summary: "Delete a memory (event DELETE, reason deleted)" },
      },
    );
