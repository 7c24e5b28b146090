import type { Storage } from "./storage";

/**
 * The storage with every `apply` answered only once the wall clock has reached the times of the
 * events it wrote, when that is at most `maxWaitMs` away. Event times are whole milliseconds,
 * stamped after the write arrived (stampFloor in ops.ts), and `since` is exclusive; with this
 * wait a client's clock and the audit trail agree both ways: a write sent after the client read
 * its clock is after that `since`, and a write answered before it is not. A namespace stamped
 * further ahead (over 1,000 events a second) is not waited for: its stamps run ahead of the
 * clock for the length of the burst (docs/api.md, "Paging").
 */
export function settledStorage(storage: Storage, maxWaitMs = 2): Storage {
  const apply: Storage["apply"] = async (ops, actorKeyId, now, idempotency) => {
    const done = await storage.apply(ops, actorKeyId, now, idempotency);
    let last = 0;
    for (const d of done) if (d && d.event.atMs > last) last = d.event.atMs;
    if (last - Date.now() <= maxWaitMs) while (Date.now() < last) await Bun.sleep(1);
    return done;
  };
  return Object.assign(Object.create(storage), { apply });
}
