// The LMDB webhooks role: subscriptions (webhooks), their delivery log (webhook_deliveries), and
// the trail by seq. One process owns a data dir, so leases always hold; seq is commit order.
import { isMainThread } from "node:worker_threads";
import { normally } from "../../thread-priority";
import type { DeliveryRecord, ErasureRecord, EventRecord, WebhookRecord } from "../records";
import { advanced, type TrailErasure, type Webhooks } from "../storage";
import { inNamespaces, matchesTrail } from "../trail-filter";
import { lastKey } from "./clock";
import { END, keys } from "./layout";
import { Writes } from "./staging";
import { flushed, type LmdbState } from "./state";
import { write } from "./writes";

/** Delivery attempts kept per subscription. */
const keptDeliveries = 100;
/** Events looked at per trailAfter call at most, matching or not (a bounded scan). */
const scanLimit = 5000;

/**
 * Runs `plan` in a write transaction of this thread, at once, and resolves once it is flushed.
 * For the webhook delivery thread (src/webhooks/delivery-thread.ts): an async transaction takes
 * LMDB's one write lock first and then waits for this thread's event loop to run the plan, and
 * that thread runs nicer than the request thread, so the stores would wait behind its turn. For
 * the same reason the thread holds the lock in the normal scheduling class, not the idle one.
 */
async function writeNow<T>(s: LmdbState, plan: (w: Writes) => T): Promise<T> {
  const w = new Writes();
  const result = normally(() =>
    s.env.transactionSync(() => {
      const r = plan(w);
      w.apply();
      return r;
    }),
  );
  await flushed(s);
  return result;
}

export function lmdbWebhooks(s: LmdbState): Webhooks {
  const { dbs } = s;
  /** One subscription's change and log entries, staged in `wr`; the record after. */
  const update = (
    wr: Writes,
    id: string,
    change: (w: WebhookRecord) => WebhookRecord | undefined,
    ds: readonly DeliveryRecord[],
  ) => {
    const w = dbs.webhooks.get(id) as WebhookRecord | undefined;
    if (!w) return undefined;
    const next = change(w);
    if (next) wr.put(dbs.webhooks, id, next);
    for (const d of ds) wr.put(dbs.webhookDeliveries, keys.webhookDelivery(id, d.atMs, d.seq, d.attempt), d);
    if (ds.length > 0) {
      // Staged writes are not visible to this range yet: keep the newest (100 - new ones) stored.
      const old = dbs.webhookDeliveries.getKeys({
        start: [id, END],
        end: [id],
        reverse: true,
        offset: Math.max(0, keptDeliveries - ds.length),
        limit: 1000,
      });
      for (const k of old) wr.remove(dbs.webhookDeliveries, k);
    }
    return next ?? w;
  };
  // Off the main thread (the delivery thread), writes run synchronously: see writeNow.
  const writeWebhooks = isMainThread
    ? <T>(plan: (w: Writes) => T) => write(s, plan)
    : <T>(plan: (w: Writes) => T) => writeNow(s, plan);
  return {
    async insertWebhook(w) {
      await write(s, (wr) => wr.put(dbs.webhooks, w.id, w));
    },

    async getWebhook(id) {
      // On the delivery thread, an edit the request thread just committed must be seen.
      if (!isMainThread) s.env.resetReadTxn();
      return dbs.webhooks.get(id) as WebhookRecord | undefined;
    },

    async listWebhooks() {
      if (!isMainThread) s.env.resetReadTxn();
      return [...dbs.webhooks.getRange({})].map((e) => e.value as WebhookRecord);
    },

    updateWebhook(id, change, options = {}) {
      return writeWebhooks((wr) => update(wr, id, change, options.deliveries ?? []));
    },

    advanceWebhooks(_owner, moves) {
      return writeWebhooks((wr) => moves.map((m) => update(wr, m.id, (cur) => advanced(cur, m), m.deliveries)));
    },

    async deleteWebhook(id) {
      return write(s, (wr) => {
        if (dbs.webhooks.get(id) === undefined) return false;
        wr.remove(dbs.webhooks, id);
        for (const k of dbs.webhookDeliveries.getKeys({ start: [id], end: [id, END] }))
          wr.remove(dbs.webhookDeliveries, k);
        return true;
      });
    },

    async webhookDeliveries(id, limit) {
      return [...dbs.webhookDeliveries.getRange({ start: [id, END], end: [id], reverse: true, limit })].map(
        (e) => e.value as DeliveryRecord,
      );
    },

    async trailAfter(afterSeq, filter, limit) {
      // The delivery thread is woken right after the request thread's commit; its shared read
      // transaction is renewed only at its next turn, so it would not see that commit yet.
      if (!isMainThread) s.env.resetReadTxn();
      if (filter.namespaces.length === 0)
        return {
          events: [],
          erasures: [],
          scannedTo: Math.max(lastKey(dbs.events), lastKey(dbs.erasureSeqs), afterSeq),
        };
      const events: EventRecord[] = [];
      let scannedTo = afterSeq;
      let read = 0;
      let full = false;
      for (const { key, value } of dbs.events.getRange({ start: afterSeq + 1, limit: scanLimit })) {
        if (typeof key !== "number") break;
        const e = value as EventRecord;
        if (matchesTrail(filter, e)) {
          if (events.length === limit) {
            full = true;
            break;
          }
          events.push(e);
        }
        scannedTo = key;
        read++;
      }
      // A scan that read every event to the end is past the erasures after them too.
      const toEnd = !full && read < scanLimit;
      const erasures: TrailErasure[] = [];
      for (const { key, value } of dbs.erasureSeqs.getRange({ start: afterSeq + 1 })) {
        if (typeof key !== "number" || (!toEnd && key > scannedTo)) break;
        const r = value as ErasureRecord;
        if (inNamespaces(filter, r.namespace)) erasures.push({ ...r, seq: key });
        scannedTo = Math.max(scannedTo, key);
      }
      return { events, erasures, scannedTo };
    },

    async eventsBySeq(seqs) {
      // Read right before a POST: an erasure the request thread just committed must be seen.
      if (!isMainThread) s.env.resetReadTxn();
      return seqs.map((seq) => dbs.events.get(seq) as EventRecord | undefined);
    },

    async erasuresCommitted() {
      if (!isMainThread) s.env.resetReadTxn();
      return dbs.erasures.getCount();
    },

    async leaseWebhook() {
      return true;
    },

    async renewWebhookLeases(ids) {
      return new Set(ids);
    },

    async releaseWebhook() {},
  };
}
