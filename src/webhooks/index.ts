import { Elysia, t } from "elysia";
import type { Core } from "../core";
import { queryLimit } from "../http/query";
import type { auth } from "../keys/auth";
import type { KeyRecord } from "../keys/model";
import type { Deliverer } from "./deliverer";
import {
  CreatedWebhook,
  CreateWebhook,
  DeliveriesQuery,
  Delivery,
  PatchWebhook,
  ReplayRequest,
  Webhook,
  WebhookParams,
} from "./model";
import {
  createWebhook,
  managedWebhook,
  manages,
  patchWebhook,
  replayFrom,
  rotateSecret,
  toDelivery,
  toWebhook,
} from "./service";

const tags = ["webhooks"];

/**
 * Webhook subscriptions: create (the secret is in this answer only), list, get, change, delete,
 * rotate the secret, list recent deliveries, replay from a seq. Any key with read permission may
 * subscribe to namespaces it covers; a key sees the subscriptions it made, an admin key also
 * those within its namespaces. Changes wake the deliverer at once.
 */
export const webhookRoutes = (
  core: Core,
  authPlugin: ReturnType<typeof auth>,
  deliverer?: Deliverer,
  root?: KeyRecord,
) => {
  const allowPrivate = core.config.webhookAllowPrivate;
  const wake = () => deliverer?.wake();
  return new Elysia({ name: "webhooks" })
    .use(authPlugin)
    .post(
      "/v1/webhooks",
      async ({ body, apiKey, set }) => {
        const { webhook, secret } = await createWebhook(core.storage, apiKey, body, allowPrivate);
        wake();
        set.status = 201;
        return { ...toWebhook(webhook), secret };
      },
      {
        permission: "read",
        body: CreateWebhook,
        response: { 201: CreatedWebhook },
        detail: {
          tags,
          summary: "Subscribe a URL to the audit trail",
          description:
            "Delivers every matching event committed after this call, one POST each, in trail order, signed the " +
            "Standard Webhooks way with the secret in this answer (shown only here). See docs/webhooks.md.",
        },
      },
    )
    .get(
      "/v1/webhooks",
      async ({ apiKey }) =>
        (await core.storage.listWebhooks()).filter((w) => manages(apiKey, w)).map((w) => toWebhook(w)),
      {
        permission: "read",
        response: { 200: t.Array(Webhook) },
        detail: { tags, summary: "List subscriptions (never their secrets)" },
      },
    )
    .get(
      "/v1/webhooks/:id",
      async ({ params, apiKey }) => toWebhook(await managedWebhook(core.storage, apiKey, params.id)),
      {
        permission: "read",
        params: WebhookParams,
        response: { 200: Webhook },
        detail: { tags, summary: "One subscription, with its state and cursor" },
      },
    )
    .patch(
      "/v1/webhooks/:id",
      async ({ params, apiKey, body }) => {
        const w = await managedWebhook(core.storage, apiKey, params.id);
        const changed = await patchWebhook(core.storage, apiKey, w, body, allowPrivate, root);
        wake();
        return toWebhook(changed);
      },
      {
        permission: "read",
        params: WebhookParams,
        body: PatchWebhook,
        response: { 200: Webhook },
        detail: {
          tags,
          summary: "Change, pause or resume a subscription",
          description:
            "state: paused stops delivery (events wait in the trail); active resumes, a disabled one too (409 when " +
            "the key that made it was revoked, expired or no longer covers its namespaces).",
        },
      },
    )
    .delete(
      "/v1/webhooks/:id",
      async ({ params, apiKey }) => {
        const w = await managedWebhook(core.storage, apiKey, params.id);
        await core.storage.deleteWebhook(w.id);
        wake();
        return { id: w.id, deleted: true };
      },
      {
        permission: "read",
        params: WebhookParams,
        response: { 200: t.Object({ id: t.String(), deleted: t.Boolean() }) },
        detail: { tags, summary: "Delete a subscription and its delivery log" },
      },
    )
    .post(
      "/v1/webhooks/:id/rotate-secret",
      async ({ params, apiKey }) => {
        const w = await managedWebhook(core.storage, apiKey, params.id);
        const { webhook, secret } = await rotateSecret(core.storage, w.id);
        wake();
        return { ...toWebhook(webhook), secret };
      },
      {
        permission: "read",
        params: WebhookParams,
        response: { 200: CreatedWebhook },
        detail: {
          tags,
          summary: "A new signing secret",
          description: "Shown in this answer only. The old secret keeps signing, beside the new one, for 24 hours.",
        },
      },
    )
    .get(
      "/v1/webhooks/:id/deliveries",
      async ({ params, apiKey, query }) => {
        const w = await managedWebhook(core.storage, apiKey, params.id);
        const limit = queryLimit(query.limit, 100, 50);
        return (await core.storage.webhookDeliveries(w.id, limit)).map(toDelivery);
      },
      {
        permission: "read",
        params: WebhookParams,
        query: DeliveriesQuery,
        response: { 200: t.Array(Delivery) },
        detail: { tags, summary: "Recent delivery attempts, newest first (the last 100 are kept)" },
      },
    )
    .post(
      "/v1/webhooks/:id/replay",
      async ({ params, apiKey, body }) => {
        const w = await managedWebhook(core.storage, apiKey, params.id);
        const changed = await replayFrom(core.storage, w.id, body.fromSeq);
        wake();
        return toWebhook(changed);
      },
      {
        permission: "read",
        params: WebhookParams,
        body: ReplayRequest,
        response: { 200: Webhook },
        detail: {
          tags,
          summary: "Send again from a point in the trail",
          description:
            "Every matching event from fromSeq on is sent again, in order, with the same webhook-id as before.",
        },
      },
    );
};
