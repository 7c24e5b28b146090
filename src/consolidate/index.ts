import { Elysia } from "elysia";
import type { Core } from "../core";
import { idempotent } from "../http/idempotency";
import type { auth } from "../keys/auth";
import { idempotencyHeader } from "../memory/model";
import { jsonAnswer } from "../wire/schemas";
import { ConsolidateRequest, ConsolidateResponse } from "./model";
import { consolidateEntity } from "./service";

/** The consolidation route (docs/undo.md#consolidation). */
export const consolidateRoutes = (core: Core, authPlugin: ReturnType<typeof auth>) =>
  new Elysia({ name: "consolidate" })
    .use(authPlugin)
    .post(
      "/v1/memory/consolidate",
      async ({ body, apiKey, set, request }) =>
        idempotent({ storage: core.storage, request, keyId: apiKey.id, body, set }, (slot) =>
          consolidateEntity(core, body, apiKey.id, slot),
        ),
      {
        permission: "read_write",
        namespace: "body",
        body: ConsolidateRequest,
        detail: {
          summary: "Merge an entity's near-duplicate memories, losing nothing",
          description:
            "Groups the memories that state the same fact and merges each group into one kept memory: a MERGE event naming the merged ones (mergedIds), a DELETE for each naming where it went (mergedInto). Without a model only the same words (up to case, punctuation, word order, stop words, inflection) are merged, never memories differing in a number, date, negation or name; with a model configured, the model judges each group and may give the merged text. Keyed facts and memories with an expiry are left alone. dryRun: true writes nothing. Undone by POST /v1/memory/restore to the moment before. See docs/undo.md.",
          responses: jsonAnswer(ConsolidateResponse),
          ...idempotencyHeader,
        },
      },
    );
