import { appendEvent, eventOf } from "../audit/service";
import type { Core } from "../core";
import { writeDurably } from "../storage/store";
import type { MemoryRecord } from "./model";
import { retireMemory } from "./service";

const batchSize = 500;

/**
 * Deletes memories whose time is up, each with a DELETE event (reason "expired"), in batches of
 * `batchSize` per transaction. Reads already hide expired memories; this makes the expiry
 * visible in the audit trail and diff. Returns how many it expired.
 */
export async function sweepExpired(core: Core, now = Date.now()): Promise<number> {
  const { dbs } = core.store;
  const due = [...dbs.expiries.getKeys({ start: [0], end: [now + 1], limit: batchSize })] as [number, string][];
  if (due.length === 0) return 0;
  const expired = await writeDurably(core.store, (w) => {
    let n = 0;
    for (const [expiresAt, id] of due) {
      const r = dbs.memories.get(id) as MemoryRecord | undefined;
      if (r?.state !== "current" || r.expiresAt !== expiresAt) {
        w.remove(dbs.expiries, [expiresAt, id]);
        continue;
      }
      const e = appendEvent(
        core.store,
        core.clock,
        w,
        eventOf("DELETE", r, null, { oldContent: r.content, reason: "expired" }),
      );
      retireMemory(core, w, r, "deleted", e.atMs);
      n++;
    }
    return n;
  });
  if (expired > 0) core.notifier.ping();
  return expired;
}

/** Runs the sweeper every `intervalMs` until stopped; well inside the 2 s promise of the contract. */
export function startTtlSweeper(core: Core, intervalMs = 250): () => Promise<void> {
  let running: Promise<unknown> = Promise.resolve();
  let stopped = false;
  const tick = () => {
    if (stopped) return;
    running = sweepExpired(core)
      .then((n) => (n === batchSize ? setImmediate(tick) : undefined))
      .catch((e) => core.logger.error("ttl sweep failed", { error: String(e) }));
  };
  const timer = setInterval(tick, intervalMs);
  return async () => {
    stopped = true;
    clearInterval(timer);
    await running;
  };
}
