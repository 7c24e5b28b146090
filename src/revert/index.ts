import { Elysia } from "elysia";
import type { Core } from "../core";
import { idempotent } from "../http/idempotency";
import type { auth } from "../keys/auth";
import { idempotencyHeader, MemoryParams } from "../memory/model";
import { jsonAnswer } from "../wire/schemas";
import { RestoreRequest, RestoreResponse, RevertRequest, RevertResponse } from "./model";
import { restoreEntity, revertMemory } from "./service";

/** Routes of revert and restore: going back to a state the audit trail holds (docs/undo.md). */
export const revertRoutes = (core: Core, authPlugin: ReturnType<typeof auth>) =>
  new Elysia({ name: "revert" })
    .use(authPlugin)
    .post(
      "/v1/memory/restore",
      async ({ body, apiKey, set, request }) =>
        idempotent({ storage: core.storage, request, keyId: apiKey.id, body, set }, (slot) =>
          restoreEntity(core, body, apiKey.id, slot),
        ),
      {
        permission: "read_write",
        namespace: "body",
        body: RestoreRequest,
        detail: {
          summary: "Restore an entity to a moment, in one write",
          description:
            "Every memory of the entity becomes what it was at asOf (as GET /v1/memory?asOf= answers): memories added since are deleted, changed ones reverted, deleted ones brought back, with ordinary ADD/UPDATE/DELETE events carrying revertOf (the asOf). Erased memories cannot come back (action erased). dryRun: true writes nothing. See docs/undo.md.",
          responses: jsonAnswer(RestoreResponse),
          ...idempotencyHeader,
        },
      },
    )
    .post(
      "/v1/memory/:id/revert",
      async ({ params, body, apiKey, memory, set, request }) =>
        idempotent({ storage: core.storage, request, keyId: apiKey.id, body, set }, (slot) =>
          revertMemory(core, params.id, body, apiKey.id, memory, slot),
        ),
      {
        permission: "read_write",
        memory: "params.id",
        params: MemoryParams,
        body: RevertRequest,
        detail: {
          summary: "Revert a memory to its state right after one of its events",
          description:
            "Content, category, importance, tags, metadata, expiry and observedAt become what they were right after toEvent; a deleted memory comes back with the same id (event ADD), reverting to the state after a DELETE deletes it. The event written carries revertOf. 410 erased when an erasure took the content. dryRun: true writes nothing. See docs/undo.md.",
          responses: jsonAnswer(RevertResponse),
          ...idempotencyHeader,
        },
      },
    );
