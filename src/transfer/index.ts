import { Elysia, t } from "elysia";
import type { Core } from "../core";
import type { auth } from "../keys/auth";
import { ApiError } from "../wire/errors";
import { Name } from "../wire/schemas";
import { exportLines } from "./service";

export const ExportQuery = t.Object(
  { namespace: t.Optional(t.Array(Name, { minItems: 1, maxItems: 256, description: "repeat for several" })) },
  { additionalProperties: false },
);

/** GET /v1/export: the same JSON Lines as `memd export`, streamed, for a server you cannot shell into. */
export const transferRoutes = (core: Core, authPlugin: ReturnType<typeof auth>) =>
  new Elysia({ name: "transfer" }).use(authPlugin).get(
    "/v1/export",
    ({ query, apiKey }) => {
      const namespaces = query.namespace;
      // Each namespace named is checked by the route's scope (namespace: "query"); none named is all.
      if (namespaces === undefined && !apiKey.namespaces.includes("*"))
        throw new ApiError("forbidden", "this key does not cover every namespace; name them with ?namespace=");
      // API keys never leave over HTTP: a server's keys are not any one namespace's data.
      const lines = exportLines(core.storage, { namespaces, keys: false });
      const encoder = new TextEncoder();
      const body = new ReadableStream<Uint8Array>({
        async pull(controller) {
          const next = await lines.next();
          if (next.done) controller.close();
          else controller.enqueue(encoder.encode(next.value));
        },
        async cancel() {
          await lines.return(undefined);
        },
      });
      return new Response(body, { headers: { "content-type": "application/x-ndjson" } });
    },
    {
      permission: "admin",
      namespace: "query",
      query: ExportQuery,
      detail: {
        summary: "Export memories, events and erasures as JSON Lines (the format of memd export)",
        description: "One consistent snapshot; without namespace, every namespace (a key covering * only).",
      },
    },
  );
