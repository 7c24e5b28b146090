import { Elysia, t } from "elysia";
import type { Core } from "../core";
import { ApiError, invalidField } from "../wire/errors";
import { isoTime, parseIsoTime } from "../wire/time";
import type { auth } from "./auth";
import { ApiKey, CreatedKey, CreateKeyRequest, KeyParams, type KeyRecord } from "./model";
import { coversKey, coversPattern, createKey, getKey, listKeys, revokeKey, toApiKey } from "./service";

const notFound = () => new ApiError("not_found", "no key with that id");

/** A live key the admin key may manage (all its namespaces within the admin's), or 404. */
async function managedKey(core: Core, admin: KeyRecord, id: string): Promise<KeyRecord> {
  const k = await getKey(core.storage, id);
  // Keys beyond the admin's namespaces answer as if they did not exist, like memories do.
  if (!k || !coversKey(admin, k)) throw notFound();
  return k;
}

/**
 * Admin routes of the keys feature: create (the secret is in this answer only), list, get and
 * revoke. An admin key limited to some namespaces manages only keys within them.
 */
export const keyRoutes = (core: Core, authPlugin: ReturnType<typeof auth>, onRevoked: () => void = () => {}) =>
  new Elysia({ name: "keys" })
    .use(authPlugin)
    .get("/v1/me", ({ apiKey }) => toApiKey(apiKey), {
      permission: "read",
      response: { 200: ApiKey },
      detail: {
        summary: "The calling key (never its secret)",
        description: "Its id, name, permission and namespace patterns: what a client may show and do.",
      },
    })
    .post(
      "/v1/keys",
      async ({ body, apiKey, set }) => {
        const expiresAt = body.expiresAt === undefined ? null : parseIsoTime(body.expiresAt);
        if (expiresAt === undefined)
          throw invalidField("expiresAt", "must be an ISO 8601 timestamp, e.g. 2027-01-31T00:00:00Z");
        // A scoped admin key cannot hand out more time than it has itself.
        if (apiKey.expiresAt !== null && (expiresAt === null || expiresAt > apiKey.expiresAt))
          throw new ApiError(
            "forbidden",
            `this key expires at ${isoTime(apiKey.expiresAt)}; a key it creates must expire by then`,
          );
        const outside = body.namespaces.find((p) => !coversPattern(apiKey, p));
        if (outside !== undefined)
          throw new ApiError("forbidden", `this key does not cover namespace pattern "${outside}"`);
        const { key, secret } = await createKey(core.storage, { ...body, expiresAt });
        set.status = 201;
        return { ...toApiKey(key), secret };
      },
      {
        permission: "admin",
        body: CreateKeyRequest,
        response: { 201: CreatedKey },
        detail: {
          summary: "Create a key",
          description: "The secret is returned in this answer only; it is stored as a hash.",
        },
      },
    )
    .get(
      "/v1/keys",
      async ({ apiKey }) => (await listKeys(core.storage)).filter((k) => coversKey(apiKey, k)).map(toApiKey),
      {
        permission: "admin",
        response: { 200: t.Array(ApiKey) },
        detail: { summary: "List live keys (never secrets)" },
      },
    )
    .get("/v1/keys/:id", async ({ params, apiKey }) => toApiKey(await managedKey(core, apiKey, params.id)), {
      permission: "admin",
      params: KeyParams,
      response: { 200: ApiKey },
      detail: { summary: "Get one key (never its secret)" },
    })
    .delete(
      "/v1/keys/:id",
      async ({ params, apiKey }) => {
        const k = await managedKey(core, apiKey, params.id);
        if (!(await revokeKey(core.storage, k.id))) throw notFound();
        // Before the answer: no webhook delivery of that key's subscriptions is sent after it.
        onRevoked();
        return { id: k.id, revoked: true };
      },
      {
        permission: "admin",
        params: KeyParams,
        detail: { summary: "Revoke a key; its next request gets 401" },
      },
    );
