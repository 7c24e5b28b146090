// Verifying a memd webhook delivery the Standard Webhooks way (the official `standardwebhooks`
// libraries do the same): HMAC-SHA256 of "<webhook-id>.<webhook-timestamp>.<body>" keyed with
// the secret's bytes, compared with each `v1,` signature of the header, and the timestamp within
// a tolerance. Web Crypto only: Bun, Node 18+, Deno, browsers.
import type { AuditEvent, Erasure } from "./types.gen.js";

/** A delivery's body for an event (docs/webhooks.md). */
export interface WebhookEventPayload {
  /** `memory.` and the event kind in lower case: `memory.add`, `memory.delete`, …; `memory.erased` for an erasure's DELETE. */
  type:
    | "memory.add"
    | "memory.merge"
    | "memory.replace"
    | "memory.delete"
    | "memory.skip_duplicate"
    | "memory.keep_existing"
    | "memory.update"
    | "memory.erased";
  /** The event's time, ISO 8601. */
  timestamp: string;
  /** The subscription's id. */
  webhookId: string;
  /** The event as GET /v1/memory/events shows it, with its seq (the trail's order). */
  data: AuditEvent & { seq: number };
}

/** A delivery's body for an erasure: sent after the `memory.erased` messages of its DELETEs, also when it had none. */
export interface WebhookErasurePayload {
  type: "entity.erased";
  /** The erasure's time, ISO 8601. */
  timestamp: string;
  webhookId: string;
  /** The erasure as GET /v1/memory/erasures lists it, with its seq in the trail. */
  data: Erasure & { seq: number };
}

/** A delivery's body: tell them apart by `type` (`entity.erased` is an erasure). */
export type WebhookPayload = WebhookEventPayload | WebhookErasurePayload;

/** A delivery that does not verify: missing headers, a timestamp too far off, or no matching signature. */
export class WebhookVerificationError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "WebhookVerificationError";
  }
}

type HeaderSource = Headers | Record<string, string | string[] | undefined>;

const header = (h: HeaderSource, name: string): string | undefined => {
  if (typeof (h as Headers).get === "function") return (h as Headers).get(name) ?? undefined;
  const rec = h as Record<string, string | string[] | undefined>;
  const found = Object.keys(rec).find((k) => k.toLowerCase() === name);
  const v = found === undefined ? undefined : rec[found];
  return Array.isArray(v) ? v[0] : v;
};

const fromBase64 = (s: string) => Uint8Array.from(atob(s), (c) => c.charCodeAt(0));
const toBase64 = (b: ArrayBuffer) => btoa(String.fromCharCode(...new Uint8Array(b)));

/** Equal strings in time that does not depend on where they differ. */
function same(a: string, b: string): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a.charCodeAt(i) ^ b.charCodeAt(i);
  return diff === 0;
}

async function subtle(): Promise<SubtleCrypto> {
  if (globalThis.crypto?.subtle) return globalThis.crypto.subtle;
  // Node 18 without the global: its webcrypto module.
  const nodeCrypto = (await import("node:crypto")) as unknown as { webcrypto: Crypto };
  return nodeCrypto.webcrypto.subtle;
}

/**
 * Checks a delivery (its headers and its body exactly as received, as text) against the
 * subscription's secret (`whsec_…`); answers the parsed body, or throws WebhookVerificationError.
 * `toleranceSeconds` (default 300): how far the webhook-timestamp may be from now, either way.
 */
export async function verifyWebhook(
  secret: string,
  headers: HeaderSource,
  body: string,
  options: { toleranceSeconds?: number; now?: number } = {},
): Promise<WebhookPayload> {
  const id = header(headers, "webhook-id");
  const timestamp = header(headers, "webhook-timestamp");
  const signatures = header(headers, "webhook-signature");
  if (!id || !timestamp || !signatures)
    throw new WebhookVerificationError("missing webhook-id, -timestamp or -signature");
  const ts = Number(timestamp);
  const now = Math.floor((options.now ?? Date.now()) / 1000);
  if (!Number.isInteger(ts) || Math.abs(now - ts) > (options.toleranceSeconds ?? 300))
    throw new WebhookVerificationError("webhook-timestamp is too far from now");
  const key = await (await subtle()).importKey(
    "raw",
    fromBase64(secret.replace(/^whsec_/, "")),
    { name: "HMAC", hash: "SHA-256" },
    false,
    ["sign"],
  );
  const mac = await (await subtle()).sign("HMAC", key, new TextEncoder().encode(`${id}.${timestamp}.${body}`));
  const expected = toBase64(mac);
  const ok = signatures.split(" ").some((s) => s.startsWith("v1,") && same(s.slice(3), expected));
  if (!ok) throw new WebhookVerificationError("no signature matches");
  return JSON.parse(body) as WebhookPayload;
}
