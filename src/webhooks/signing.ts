// Standard Webhooks signing (https://www.standardwebhooks.com): the headers webhook-id,
// webhook-timestamp and webhook-signature, so that the official libraries verify a delivery.
import { createHmac, randomBytes } from "node:crypto";

export const secretPrefix = "whsec_";

/** A new signing secret: `whsec_` and 32 random bytes in base64 (the key is those bytes). */
export const newSecret = () => secretPrefix + randomBytes(32).toString("base64");

/** Key bytes by secret (a delivery thread signs with a few secrets, each many times). */
const keys = new Map<string, Buffer>();

/** `v1,<base64 HMAC-SHA256 of "id.timestamp.body">` with the secret's key bytes. */
export function signature(secret: string, id: string, timestampSeconds: number, body: string): string {
  let key = keys.get(secret);
  if (!key) {
    if (keys.size >= 1000) keys.clear();
    key = Buffer.from(secret.slice(secretPrefix.length), "base64");
    keys.set(secret, key);
  }
  return `v1,${createHmac("sha256", key).update(`${id}.${timestampSeconds}.${body}`).digest("base64")}`;
}

/**
 * The three headers of one delivery attempt. Every secret given signs (space-separated, as the
 * standard allows): after a rotation the old one too, while it is still valid.
 */
export function signedHeaders(
  secrets: readonly string[],
  id: string,
  body: string,
  nowMs = Date.now(),
): Record<string, string> {
  const ts = Math.floor(nowMs / 1000);
  return {
    "webhook-id": id,
    "webhook-timestamp": String(ts),
    "webhook-signature": secrets.map((s) => signature(s, id, ts, body)).join(" "),
  };
}
