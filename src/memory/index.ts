import { Elysia, t } from "elysia";
import { readAsOf } from "../audit/service";
import { limits } from "../config/limits";
import type { Core } from "../core";
import { embedHeaders, newCost } from "../embedding/client";
import type { DirectRoute } from "../http/direct";
import { type IdempotencySlot, idempotent } from "../http/idempotency";
import { queryLimit } from "../http/query";
import { type auth, checkScope } from "../keys/auth";
import type { KeyRecord } from "../keys/model";
import { permits } from "../keys/service";
import { ApiError } from "../wire/errors";
import { jsonAnswer } from "../wire/schemas";
import { instantField } from "../wire/time";
import {
  EntityQuery,
  EraseRequest,
  Erasure,
  ErasuresQuery,
  GetQuery,
  idempotencyHeader,
  ListQuery,
  ListResponse,
  Memory,
  MemoryParams,
  type ObserveChanges,
  PatchRequest,
  StoreRequest,
  StoreResponse,
} from "./model";
import {
  currentOf,
  deleteEntity,
  deleteMemory,
  eraseEntity,
  findMemoryAsOf,
  listMemories,
  patchMemory,
  storeRaw,
  toErasure,
  toMemory,
} from "./service";

export type SmartStore = (
  req: StoreRequest,
  actorKeyId: string,
  set: { headers: Record<string, unknown> },
  idempotency?: IdempotencySlot,
  observe?: ObserveChanges,
) => Promise<StoreResponse>;

const unavailable: SmartStore = async () => {
  throw new ApiError("extraction_unavailable", "smart store (infer: true) is not available; send infer: false");
};

/** A raw store's answer (infer: false), with its embedding cost headers. */
async function storeRawAnswer(
  core: Core,
  body: StoreRequest,
  keyId: string,
  headers: Record<string, unknown>,
  idempotency?: IdempotencySlot,
) {
  const cost = newCost();
  const res = await storeRaw(core, body, keyId, cost, idempotency);
  Object.assign(headers, embedHeaders(cost));
  return res;
}

/**
 * POST /v1/memory as a direct route (http/direct.ts) for its plain case, a raw store without an
 * Idempotency-Key: the same answer as the app's route below, outside Elysia's hooks.
 */
export const directStore = (core: Core): DirectRoute<StoreRequest, KeyRecord> => ({
  path: "/v1/memory",
  allows: (key) => permits(key, "read_write"),
  body: StoreRequest,
  freeForm: ["metadata"],
  // With an Idempotency-Key too: the key's answer is kept by the store's own transaction, so
  // clients can send one on every write without leaving this path.
  serves: (_request, body) => body.infer === false || body.key !== undefined,
  handle(body, key, headers, request) {
    checkScope(key, body.namespace);
    return idempotent({ storage: core.storage, request, keyId: key.id, body, set: { headers } }, (slot) =>
      storeRawAnswer(core, body, key.id, headers, slot),
    );
  },
});

/** Routes of the memory feature: store (raw or smart), and reads of current memories. */
export const memoryRoutes = (core: Core, authPlugin: ReturnType<typeof auth>, smartStore: SmartStore = unavailable) =>
  new Elysia({ name: "memory" })
    .use(authPlugin)
    .post(
      "/v1/memory",
      async ({ body, apiKey, set, request }) => {
        return idempotent({ storage: core.storage, request, keyId: apiKey.id, body, set }, async (slot) => {
          // A keyed fact is stored verbatim (docs/keyed-facts.md).
          if (body.infer !== false && body.key === undefined) return smartStore(body, apiKey.id, set, slot);
          return storeRawAnswer(core, body, apiKey.id, set.headers, slot);
        });
      },
      {
        permission: "read_write",
        namespace: "body",
        body: StoreRequest,
        detail: {
          summary: "Store a memory",
          description:
            "infer: false stores content verbatim; infer: true (default) extracts facts. With key: a keyed fact, stored verbatim; the memory holding the key is updated in place (docs/keyed-facts.md).",
          responses: jsonAnswer(StoreResponse),
          ...idempotencyHeader,
        },
      },
    )
    .get(
      "/v1/memory",
      async ({ query }) => {
        const limit = queryLimit(query.limit, limits.pageMax, limits.listDefault);
        const { namespace, entity, entityPrefix, category, tag, key } = query;
        const q = {
          namespace,
          entity,
          entityPrefix,
          key,
          category,
          tags: tag,
          limit,
          asOf: await readAsOf(core.storage, namespace, query.asOf),
          observedAfter: instantField("observedAfter", query.observedAfter),
          observedBefore: instantField("observedBefore", query.observedBefore),
        };
        return listMemories(core, q, query.cursor);
      },
      {
        permission: "read",
        namespace: "query",
        query: ListQuery,
        detail: {
          summary: "List current memories, newest first, a page at a time",
          description:
            "Follow nextCursor until it is null; paging never loses or repeats a memory. With asOf: the memories exactly as they were current at that instant, replayed from the audit trail (docs/time.md). With key (and entity): the memory holding that key, alone (docs/keyed-facts.md).",
          responses: jsonAnswer(ListResponse),
        },
      },
    )
    .get(
      "/v1/memory/erasures",
      async ({ query }) => {
        return (await core.storage.erasures(query.namespace, query.entity)).map(toErasure);
      },
      {
        permission: "admin",
        namespace: "query",
        query: ErasuresQuery,
        detail: { summary: "Erasures of a namespace or entity, oldest first", responses: jsonAnswer(t.Array(Erasure)) },
      },
    )
    .post(
      "/v1/memory/erase",
      async ({ body, apiKey }) => {
        return eraseEntity(core, body.namespace, body.entity, apiKey.id);
      },
      {
        permission: "admin",
        namespace: "body",
        body: EraseRequest,
        detail: {
          summary: "Erase an entity: every memory, current or not, loses its content; events lose theirs",
          responses: jsonAnswer(Erasure),
        },
      },
    )
    .patch(
      "/v1/memory/:id",
      async ({ params, body, apiKey, memory, set, request }) =>
        idempotent({ storage: core.storage, request, keyId: apiKey.id, body, set }, (slot) =>
          patchMemory(core, params.id, body, apiKey.id, memory, slot),
        ),
      {
        permission: "read_write",
        memory: "params.id",
        params: MemoryParams,
        body: PatchRequest,
        detail: {
          summary: "Edit a memory in place (event UPDATE, reason edited)",
          description: "tags or metadata given as null are removed. An empty body or one that changes nothing: 400.",
          responses: jsonAnswer(Memory),
          ...idempotencyHeader,
        },
      },
    )
    .delete(
      "/v1/memory",
      async ({ query, apiKey, set, request }) => {
        return idempotent({ storage: core.storage, request, keyId: apiKey.id, body: undefined, set }, (slot) =>
          deleteEntity(core, query.namespace, query.entity, apiKey.id, slot),
        );
      },
      {
        permission: "read_write",
        namespace: "query",
        query: EntityQuery,
        detail: {
          summary: "Delete every current memory of an entity (one DELETE event each, reason deleted)",
          responses: jsonAnswer(t.Object({ deleted: t.Integer() })),
          ...idempotencyHeader,
        },
      },
    )
    .get(
      "/v1/memory/:id",
      async ({ params, query, memory }) => {
        const asOf = await readAsOf(core.storage, memory?.namespace, query.asOf);
        // `memory` is undefined for an unknown id and for one outside the key's namespaces: one answer.
        const r = asOf === undefined ? currentOf(memory) : memory && (await findMemoryAsOf(core, params.id, asOf));
        if (!r) throw new ApiError("not_found", "no memory with that id");
        return toMemory(r);
      },
      {
        permission: "read",
        memory: "params.id",
        params: MemoryParams,
        query: GetQuery,
        detail: {
          summary: "Get one current memory (with asOf: as it was current at that instant)",
          responses: jsonAnswer(Memory),
        },
      },
    )
    .delete(
      "/v1/memory/:id",
      async ({ params, apiKey, memory, set, request }) =>
        idempotent({ storage: core.storage, request, keyId: apiKey.id, body: undefined, set }, (slot) =>
          deleteMemory(core, params.id, apiKey.id, memory, slot),
        ),
      {
        permission: "read_write",
        memory: "params.id",
        params: MemoryParams,
        detail: { summary: "Delete a memory (event DELETE, reason deleted)", ...idempotencyHeader },
      },
    );
