import {
  type Applied,
  type Idempotency,
  IdempotencyKeyTaken,
  type IdempotencyRecord,
  type MemoryWrites,
} from "../storage/storage";
import { ApiError, invalidField } from "../wire/errors";

/** How long an answer is kept for replays. */
export const IDEMPOTENCY_TTL_MS = 24 * 3600 * 1000;
const validKey = /^[\x20-\x7e]{1,255}$/;

export interface IdempotentCall {
  storage: MemoryWrites & Idempotency;
  request: Request;
  keyId: string;
  /** The parsed body (or undefined), part of what a repeat must match. */
  body: unknown;
  set: { status?: number | string; headers: Record<string, unknown> };
}

/**
 * What a route hands to the code that makes its change: `record(answerOf)` is the
 * IdempotencyRecord to pass to that change's `apply`, with `answerOf` building the route's answer
 * from what the ops did. Undefined without an Idempotency-Key.
 */
export interface IdempotencySlot {
  record<T>(answerOf: (applied: readonly (Applied | null)[]) => T | undefined): IdempotencyRecord;
}

/** Requests with an Idempotency-Key running in this process, by API key and Idempotency-Key. */
const running = new Map<string, Promise<unknown>>();

/**
 * Runs `run` at most once per (API key, Idempotency-Key) within 24 hours. Without the header it
 * just runs. The answer is kept by the change's own transaction (`run` passes the slot's record
 * to its apply), so the change and its answer commit together: a repeat with the same method,
 * path and body gets the first answer (status and body) with `idempotent-replayed: true` and
 * nothing runs; after a failure of any kind (an error, a cut connection, a killed process) it
 * finds either that answer or nothing done, and then runs. There is no lease to wait out. Another
 * request under the same key is refused (422 idempotency_key_reused). A repeat that arrives while
 * the first runs in this process waits for it; one on another replica runs too, and the
 * database keeps only the first answer (the other writes nothing and replays it).
 */
export async function idempotent<T>(
  call: IdempotentCall,
  run: (slot: IdempotencySlot | undefined) => Promise<T>,
): Promise<T | Response> {
  const key = call.request.headers.get("idempotency-key");
  if (key === null) return run(undefined);
  if (!validKey.test(key)) throw invalidField("Idempotency-Key", "must be 1 to 255 printable ASCII characters");
  const url = new URL(call.request.url);
  const hash = new Bun.CryptoHasher("sha256")
    .update(`${call.request.method} ${url.pathname}${url.search}\n${JSON.stringify(call.body ?? null)}`)
    .digest("hex");
  const { storage, keyId } = call;
  const id = JSON.stringify([keyId, key]);
  // One at a time per key in this process: a repeat waits for the first and then replays it.
  for (let ahead = running.get(id); ahead; ahead = running.get(id)) await ahead.catch(() => undefined);
  const mine = (async () => {
    const kept = await replay(storage, keyId, key, hash);
    if (kept) return kept;
    let used = false;
    const slot: IdempotencySlot = {
      record: (answerOf) => {
        used = true;
        return {
          keyId,
          key,
          hash,
          expiresAt: Date.now() + IDEMPOTENCY_TTL_MS,
          answer(applied) {
            const answer = answerOf(applied);
            return answer === undefined ? undefined : { status: statusOf(call.set), body: JSON.stringify(answer) };
          },
        };
      },
    };
    let result: T;
    try {
      result = await run(slot);
    } catch (e) {
      if (!(e instanceof IdempotencyKeyTaken)) throw e;
      const first = await replay(storage, keyId, key, hash);
      if (first) return first;
      throw e; // kept and already expired: not expected within 24 hours
    }
    // A route whose success changed nothing (no apply took the slot) keeps its answer alone.
    if (!used) {
      const record = slot.record(() => result);
      await storage.apply([], keyId, undefined, record).catch(async (e) => {
        if (!(e instanceof IdempotencyKeyTaken)) throw e;
      });
    }
    return result;
  })();
  running.set(id, mine);
  try {
    return await mine;
  } finally {
    if (running.get(id) === mine) running.delete(id);
  }
}

const statusOf = (set: IdempotentCall["set"]) => (typeof set.status === "number" ? set.status : 200);

/** The kept answer as a Response, or undefined; a kept answer of another request is a 422. */
async function replay(storage: Idempotency, keyId: string, key: string, hash: string): Promise<Response | undefined> {
  const entry = await storage.idempotentAnswer(keyId, key, Date.now());
  if (!entry) return undefined;
  if (entry.hash !== hash)
    throw new ApiError(
      "idempotency_key_reused",
      "this Idempotency-Key was used with another request; use a new key for a new request",
    );
  return new Response(entry.body, {
    status: entry.status,
    headers: { "content-type": "application/json", "idempotent-replayed": "true" },
  });
}
