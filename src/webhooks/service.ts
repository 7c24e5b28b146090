import { randomBytes } from "node:crypto";
import { toAuditEvent } from "../audit/service";
import type { KeyRecord } from "../keys/model";
import { patternOutside, patternProblem, permits, rootKeyId } from "../keys/service";
import { toErasure } from "../memory/service";
import { type EventKind, type EventRecord, eventKinds } from "../storage/records";
import type { KeyStore, TrailErasure, TrailFilter, Webhooks } from "../storage/storage";
import { ApiError, invalidField } from "../wire/errors";
import { isoTime } from "../wire/time";
import { AddressRefused, resolveTarget } from "./address";
import type { CreateWebhook, Delivery, DeliveryRecord, PatchWebhook, Webhook, WebhookRecord } from "./model";
import { newSecret } from "./signing";

/** How long the secret before a rotation keeps signing deliveries. */
export const previousSecretMs = 24 * 3600_000;

const iso = (ms: number | null) => (ms === null ? null : isoTime(ms));

/** The public shape of a subscription: everything but its secrets. */
export function toWebhook(w: WebhookRecord, now = Date.now()): Webhook {
  return {
    id: w.id,
    url: w.url,
    namespaces: w.namespaces,
    events: w.events,
    description: w.description,
    state: w.state,
    stateReason: w.stateReason,
    createdBy: w.createdBy,
    createdAt: isoTime(w.createdAt),
    updatedAt: isoTime(w.updatedAt),
    cursor: w.cursor,
    failingSince: iso(w.failingSince),
    lastDeliveredAt: iso(w.lastDeliveredAt),
    lastError: w.lastError,
    previousSecretUntil:
      w.previousSecretUntil !== null && w.previousSecretUntil > now ? iso(w.previousSecretUntil) : null,
  };
}

export function toDelivery(d: DeliveryRecord): Delivery {
  return {
    seq: d.seq,
    messageId: d.messageId,
    event: d.eventKind,
    namespace: d.namespace,
    at: isoTime(d.atMs),
    attempt: d.attempt,
    status: d.status,
    ok: d.ok,
    error: d.error,
    durationMs: d.durationMs,
  };
}

/** The webhook-id of an event's deliveries to a subscription: the same for every attempt and replay. */
export const messageId = (w: WebhookRecord, seq: number) => `msg_${seq}_${w.id}`;

/** Which events of the trail a subscription wants. */
export const trailFilter = (w: WebhookRecord): TrailFilter => ({
  namespaces: w.namespaces,
  kinds: w.events.length === eventKinds.length ? [] : w.events,
});

/** A DELETE an erasure wrote: delivered as `memory.erased`, the erased memory reaching the receiver. */
const erasedBy = (e: EventRecord) => e.event === "DELETE" && e.reason === "erased";

/** What a subscription delivers: the trail's events, and the erasures at their seqs. */
export type TrailItem = EventRecord | TrailErasure;

export const isErasure = (x: TrailItem): x is TrailErasure => !("memoryId" in x);

/** A page of the trail as one list in seq order. */
export const trailItems = (page: { events: EventRecord[]; erasures: TrailErasure[] }): TrailItem[] =>
  page.erasures.length === 0 ? page.events : [...page.events, ...page.erasures].sort((a, b) => a.seq - b.seq);

/**
 * The body of a delivery: `type`, `timestamp`, `webhookId` and `data`. For an event: `memory.` and
 * the event kind in lower case (`memory.erased` for an erasure's DELETE), the event's time, and the
 * event as GET /v1/memory/events shows it, with `seq`. For an erasure (after the DELETEs it made,
 * whatever the subscription's kinds): `entity.erased`, its time, and the erasure as GET
 * /v1/memory/erasures shows it, with `seq`.
 */
export function payload(w: WebhookRecord, e: TrailItem): string {
  const [head, tail] = bodyParts(e);
  return head + JSON.stringify(w.id) + tail;
}

/**
 * What a delivery's body holds besides the subscription's id, serialized once per item read (so
 * once, not once per subscription, when the subscriptions share it): the JSON up to the id's value,
 * and after it. Together they are the bytes JSON.stringify gives the whole body.
 */
const partsOf = new WeakMap<TrailItem, [string, string]>();

function bodyParts(e: TrailItem): [string, string] {
  let parts = partsOf.get(e);
  if (parts) return parts;
  const [type, data] = isErasure(e)
    ? ["entity.erased", { ...toErasure(e), seq: e.seq }]
    : [erasedBy(e) ? "memory.erased" : `memory.${e.event.toLowerCase()}`, { ...toAuditEvent(e), seq: e.seq }];
  const head = JSON.stringify({ type, timestamp: isoTime(e.atMs) });
  parts = [`${head.slice(0, -1)},"webhookId":`, `,"data":${JSON.stringify(data)}}`];
  partsOf.set(e, parts);
  return parts;
}

/** The secrets that sign now: the current one, and the one before a rotation for its 24 hours. */
export const signingSecrets = (w: WebhookRecord, now = Date.now()) =>
  w.previousSecret !== null && w.previousSecretUntil !== null && w.previousSecretUntil > now
    ? [w.secret, w.previousSecret]
    : [w.secret];

/** A URL a subscription may have, or a 400: http(s), and a public address unless private ones are allowed. */
export async function checkUrl(raw: string, allowPrivate: boolean): Promise<string> {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw invalidField("url", "is not a URL");
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") throw invalidField("url", "must be http:// or https://");
  if (url.username || url.password) throw invalidField("url", "may not hold a user name or password");
  url.hash = "";
  // The name is resolved here to refuse a private address early; each delivery checks the address it connects to.
  try {
    await Promise.race([resolveTarget(url, allowPrivate), Bun.sleep(2000)]);
  } catch (e) {
    if (e instanceof AddressRefused) throw invalidField("url", e.message);
    // A name that does not resolve now may later: deliveries retry.
  }
  return url.toString();
}

const patternsOf = (raw: string | string[]) => (typeof raw === "string" ? [raw] : [...new Set(raw)]);

/** Namespace patterns valid and within the key's, or a 400 / 403. */
function checkPatterns(key: KeyRecord, raw: string | string[]): string[] {
  const patterns = patternsOf(raw);
  patterns.forEach((p, i) => {
    const problem = patternProblem(p);
    if (problem) throw invalidField(`namespaces[${i}]`, `"${p}" ${problem}`);
  });
  const outside = patternOutside(key, patterns);
  if (outside !== undefined) throw new ApiError("forbidden", `this key does not cover namespace pattern "${outside}"`);
  return patterns;
}

/** Makes a subscription for `key`; answers it with its secret, shown this once. */
export async function createWebhook(
  storage: Webhooks,
  key: KeyRecord,
  body: CreateWebhook,
  allowPrivate: boolean,
  now = Date.now(),
): Promise<{ webhook: WebhookRecord; secret: string }> {
  const namespaces = checkPatterns(key, body.namespaces);
  const url = await checkUrl(body.url, allowPrivate);
  const secret = newSecret();
  const w: WebhookRecord = {
    id: `wh_${randomBytes(8).toString("hex")}`,
    url,
    namespaces,
    events: body.events ?? [...eventKinds],
    description: body.description ?? null,
    secret,
    previousSecret: null,
    previousSecretUntil: null,
    createdBy: key.id,
    createdAt: now,
    updatedAt: now,
    state: "active",
    stateReason: null,
    // From the next event committed after this answer (a replay sends earlier ones).
    cursor: await lastSeq(storage),
    rev: 0,
    failingSince: null,
    lastDeliveredAt: null,
    lastError: null,
  };
  await storage.insertWebhook(w);
  return { webhook: w, secret };
}

/** The seq of the newest event of the trail (0 when empty): a filter of no namespace scans to the end at once. */
export const lastSeq = async (storage: Webhooks) =>
  (await storage.trailAfter(0, { namespaces: [], kinds: [] }, 1)).scannedTo;

/** Whether `key` may see and manage `w`: its maker, or an admin key that covers all of its namespaces. */
export const manages = (key: KeyRecord, w: WebhookRecord) =>
  w.createdBy === key.id || (permits(key, "admin") && patternOutside(key, w.namespaces) === undefined);

/** A subscription `key` manages, or 404. */
export async function managedWebhook(storage: Webhooks, key: KeyRecord, id: string): Promise<WebhookRecord> {
  const w = await storage.getWebhook(id);
  if (!w || !manages(key, w)) throw new ApiError("not_found", "no webhook with that id");
  return w;
}

/** Applies an API change to a subscription (bumping its rev, so a deliverer re-plans), or 404. */
async function change(
  storage: Webhooks,
  id: string,
  fn: (w: WebhookRecord) => Partial<WebhookRecord>,
  now = Date.now(),
): Promise<WebhookRecord> {
  const w = await storage.updateWebhook(id, (cur) => ({ ...cur, ...fn(cur), rev: cur.rev + 1, updatedAt: now }));
  if (!w) throw new ApiError("not_found", "no webhook with that id");
  return w;
}

/**
 * PATCH: url, filter, description, pause or resume (a resumed one starts afresh, failures
 * forgotten). One whose maker key no longer allows it is not resumed (409, saying why): it would
 * pause again at once. `root` is the MEMD_API_KEY key.
 */
export async function patchWebhook(
  storage: Webhooks & KeyStore,
  key: KeyRecord,
  w: WebhookRecord,
  body: PatchWebhook,
  allowPrivate: boolean,
  root: KeyRecord | undefined,
): Promise<WebhookRecord> {
  if (body.state !== undefined && body.paused !== undefined && (body.state === "paused") !== body.paused)
    throw invalidField("paused", "contradicts state");
  const wanted = body.state ?? (body.paused === undefined ? undefined : body.paused ? "paused" : "active");
  const namespaces = body.namespaces === undefined ? undefined : checkPatterns(key, body.namespaces);
  if (wanted === "active") {
    const { problem } = await creatorProblem(storage, root, { ...w, namespaces: namespaces ?? w.namespaces });
    if (problem)
      throw new ApiError(
        "conflict",
        `${problem}: this subscription cannot be resumed; subscribe again with a key that covers its namespaces`,
      );
  }
  const url = body.url === undefined ? undefined : await checkUrl(body.url, allowPrivate);
  return change(storage, w.id, (cur) => ({
    ...(url !== undefined ? { url } : {}),
    ...(namespaces !== undefined ? { namespaces } : {}),
    ...(body.events !== undefined ? { events: body.events as EventKind[] } : {}),
    ...(body.description !== undefined ? { description: body.description } : {}),
    ...(wanted === "paused" ? { state: "paused" as const, stateReason: "paused through the API" } : {}),
    ...(wanted === "active"
      ? { state: "active" as const, stateReason: null, failingSince: null, lastError: cur.lastError }
      : {}),
  }));
}

/** A new secret; the old one keeps signing (beside it) for 24 hours. Answers the record and the new secret. */
export async function rotateSecret(storage: Webhooks, id: string, now = Date.now()) {
  const secret = newSecret();
  const w = await change(
    storage,
    id,
    (cur) => ({ secret, previousSecret: cur.secret, previousSecretUntil: now + previousSecretMs }),
    now,
  );
  return { webhook: w, secret };
}

/**
 * Sends again every matching event from `fromSeq` on (the cursor moves back, or forward up to the
 * end of the trail); a seq past the next one to be written is refused: the events committed
 * until the trail reached it would never be sent.
 */
export async function replayFrom(storage: Webhooks, id: string, fromSeq: number) {
  let last = await lastSeq(storage);
  // On PostgreSQL the trail ends where every transaction has ended: one still in flight (another
  // namespace's store) holds that back a moment behind seqs already committed and answered.
  for (let i = 0; fromSeq > last + 1 && i < 5; i++) {
    await Bun.sleep(20);
    last = await lastSeq(storage);
  }
  if (fromSeq > last + 1)
    throw invalidField(
      "fromSeq",
      `is past the end of the trail: its last seq is ${last} (${last + 1} sends what comes next)`,
    );
  return change(storage, id, () => ({ cursor: fromSeq - 1, failingSince: null }));
}

/**
 * Why the key that made a subscription may no longer have it delivered (revoked, expired, or no
 * longer covering one of its patterns), or undefined; and when that key expires (checked again
 * then, without a read). The root key (MEMD_API_KEY) is `root`.
 */
export async function creatorProblem(
  keys: KeyStore,
  root: KeyRecord | undefined,
  w: WebhookRecord,
  now = Date.now(),
): Promise<{ problem: string | undefined; expiresAt: number }> {
  const key = w.createdBy === rootKeyId ? root : await keys.getKey(w.createdBy);
  const by = `the key that made it (${w.createdBy})`;
  if (!key) return { problem: `${by} no longer exists`, expiresAt: now };
  const expiresAt = key.expiresAt ?? Number.POSITIVE_INFINITY;
  if (key.revokedAt !== null) return { problem: `${by} was revoked`, expiresAt };
  if (expiresAt <= now) return { problem: `${by} has expired`, expiresAt };
  const outside = patternOutside(key, w.namespaces);
  return { problem: outside === undefined ? undefined : `${by} no longer covers "${outside}"`, expiresAt };
}
