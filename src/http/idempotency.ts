import { IDEMPOTENCY_LEASE_MS, IDEMPOTENCY_TTL_MS } from "../storage/records";
import type { Storage } from "../storage/storage";
import { ApiError, invalidField } from "./errors";

export { IDEMPOTENCY_LEASE_MS, IDEMPOTENCY_TTL_MS };

const validKey = /^[\x20-\x7e]{1,255}$/;

export interface IdempotentCall {
  storage: Storage;
  request: Request;
  keyId: string;
  /** The parsed body (or undefined), part of what a repeat must match. */
  body: unknown;
  set: { status?: number | string; headers: Record<string, unknown> };
  /** How often a waiting duplicate looks again; tests pass less. */
  pollMs?: number;
}

/**
 * Runs `run` at most once per (API key, Idempotency-Key) within 24 hours. Without the header it
 * just runs. A repeat with the same method, path and body gets the first answer (status and
 * body) with `idempotent-replayed: true`, and nothing runs; another request under the same key
 * is refused (422 idempotency_key_reused). A repeat that arrives while the first still runs waits
 * for its answer. Only successful answers are kept: after an error the key is free again, so a
 * failed request leaves nothing behind.
 */
export async function idempotent<T>(call: IdempotentCall, run: () => Promise<T>): Promise<T | Response> {
  const key = call.request.headers.get("idempotency-key");
  if (key === null) return run();
  if (!validKey.test(key)) throw invalidField("Idempotency-Key", "must be 1 to 255 printable ASCII characters");
  const url = new URL(call.request.url);
  const hash = new Bun.CryptoHasher("sha256")
    .update(`${call.request.method} ${url.pathname}${url.search}\n${JSON.stringify(call.body ?? null)}`)
    .digest("hex");
  const { storage, keyId } = call;
  const started = Date.now();
  for (;;) {
    const now = Date.now();
    const claim = await storage.claimIdempotency(keyId, key, hash, now, IDEMPOTENCY_LEASE_MS);
    if (claim.state === "mismatch")
      throw new ApiError(
        "idempotency_key_reused",
        "this Idempotency-Key was used with another request; use a new key for a new request",
      );
    if (claim.state === "done")
      return new Response(claim.entry.body, {
        status: claim.entry.status,
        headers: { "content-type": "application/json", "idempotent-replayed": "true" },
      });
    if (claim.state === "claimed") break;
    // Another request with this key is running: wait for its answer.
    if (now - started > IDEMPOTENCY_LEASE_MS)
      throw new ApiError("storage_unavailable", "a request with this Idempotency-Key is still running");
    await Bun.sleep(call.pollMs ?? 25);
  }
  let result: T;
  try {
    result = await run();
  } catch (e) {
    await storage.releaseIdempotency(keyId, key).catch(() => undefined);
    throw e;
  }
  const status = typeof call.set.status === "number" ? call.set.status : 200;
  await storage.finishIdempotency(keyId, key, status, JSON.stringify(result), Date.now() + IDEMPOTENCY_TTL_MS);
  return result;
}
