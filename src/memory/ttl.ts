import type { Core } from "../core";
import type { Idempotency, MemoryReads, MemoryWrites } from "../storage/storage";

/** What the sweeper uses: the expiries due, apply, and the Idempotency-Keys past their time. */
type SweeperCore = Core<MemoryReads & MemoryWrites & Idempotency>;

const batchSize = 500;

/**
 * Deletes memories whose time is up, each with a DELETE event (reason "expired"), in batches of
 * `batchSize` per transaction. Reads already hide expired memories; this makes the expiry
 * visible in the audit trail and diff. Safe to run in several processes on one database: an op
 * only acts on a memory that still expires at that time, so each expiry is recorded once.
 * Returns how many it expired.
 */
export async function sweepExpired(core: SweeperCore, now = Date.now()): Promise<number> {
  const due = await core.storage.dueExpiries(now, batchSize);
  if (due.length === 0) return 0;
  const ops = due.map(({ id, expiresAt }) => ({ event: "DELETE" as const, target: id, reason: "expired", expiresAt }));
  const done = await core.storage.apply(ops, null, now);
  return done.filter(Boolean).length;
}

/** Runs the sweeper every `intervalMs` until stopped; well inside the 2 s promise of the contract. */
export function startTtlSweeper(core: SweeperCore, intervalMs = 250): () => Promise<void> {
  let running: Promise<unknown> = Promise.resolve();
  let stopped = false;
  const tick = () => {
    if (stopped) return;
    running = Promise.all([sweepExpired(core), core.storage.sweepIdempotency(Date.now(), batchSize)])
      .then(([n]) => n)
      .then((n) => (n > 0 ? setImmediate(tick) : undefined))
      .catch((e) => core.logger.error("ttl sweep failed", { error: String(e) }));
  };
  const timer = setInterval(tick, intervalMs);
  return async () => {
    stopped = true;
    clearInterval(timer);
    await running;
  };
}
