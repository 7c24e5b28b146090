import { t } from "elysia";
import { LimitParam } from "../http/query";
import { NamespacePattern } from "../keys/model";
import { DeliveryRecord, eventKinds, WebhookRecord, webhookStates } from "../storage/records";
import { NoControlText, oneOf, Timestamp } from "../wire/schemas";

export type { DeliveryRecord, WebhookRecord } from "../storage/records";

const Url = t.String({
  minLength: 1,
  maxLength: 2048,
  description: "http:// or https:// (prefer https); must reach a public address unless the server allows private ones",
});
const Patterns = t.Union([NamespacePattern, t.Array(NamespacePattern, { minItems: 1, maxItems: 64 })], {
  description: "a namespace pattern as keys have them (`*`, a name, `prefix/*`), or a list of them",
});
const Kinds = t.Array(oneOf(eventKinds), {
  minItems: 1,
  maxItems: eventKinds.length,
  uniqueItems: true,
  description: "event kinds to deliver; absent: all",
});
const Description = NoControlText(0, 500);

export const CreateWebhook = t.Object(
  { url: Url, namespaces: Patterns, events: t.Optional(Kinds), description: t.Optional(Description) },
  { additionalProperties: false },
);
export type CreateWebhook = typeof CreateWebhook.static;

export const PatchWebhook = t.Object(
  {
    url: t.Optional(Url),
    namespaces: t.Optional(Patterns),
    events: t.Optional(Kinds),
    description: t.Optional(t.Nullable(Description)),
    state: t.Optional(
      t.Union([t.Literal("active"), t.Literal("paused")], {
        description: "paused: delivery stops (events wait); active: resumes, also a disabled one",
      }),
    ),
    paused: t.Optional(t.Boolean({ description: "the same as state: paused (true) or active (false)" })),
  },
  { additionalProperties: false },
);
export type PatchWebhook = typeof PatchWebhook.static;

/** A subscription as the API shows it: never its secret (but at creation and rotation). */
export const Webhook = t.Object({
  id: t.String(),
  url: t.String(),
  namespaces: t.Array(t.String()),
  events: WebhookRecord.properties.events,
  description: t.Nullable(t.String()),
  state: oneOf(webhookStates),
  stateReason: t.Nullable(t.String({ description: "why it is paused or disabled" })),
  createdBy: t.String({ description: "the id of the key that made it: it delivers what that key may read" }),
  createdAt: Timestamp,
  updatedAt: Timestamp,
  cursor: t.Integer({ description: "seq of the last event of the trail it is past: delivery goes on after it" }),
  failingSince: t.Nullable(Timestamp),
  lastDeliveredAt: t.Nullable(Timestamp),
  lastError: t.Nullable(t.String()),
  previousSecretUntil: t.Nullable(Timestamp),
});
export type Webhook = typeof Webhook.static;

export const CreatedWebhook = t.Composite([
  Webhook,
  t.Object({ secret: t.String({ description: "whsec_…: the signing secret, shown in this answer only" }) }),
]);

export const Delivery = t.Object({
  seq: DeliveryRecord.properties.seq,
  messageId: t.String({ description: "the webhook-id header sent: the same for every attempt of one event" }),
  event: t.String({ description: "the event's kind, or ERASURE for an erasure (its entity.erased message)" }),
  namespace: t.String(),
  at: Timestamp,
  attempt: DeliveryRecord.properties.attempt,
  status: t.Nullable(t.Integer()),
  ok: t.Boolean(),
  error: t.Nullable(t.String()),
  durationMs: t.Number(),
});
export type Delivery = typeof Delivery.static;

export const WebhookParams = t.Object({ id: t.String({ minLength: 1, maxLength: 64 }) });
export const DeliveriesQuery = t.Object({ limit: t.Optional(LimitParam(100, 50)) }, { additionalProperties: false });
export const ReplayRequest = t.Object(
  { fromSeq: t.Integer({ minimum: 1, description: "send again every matching event from this seq on" }) },
  { additionalProperties: false },
);
