// Delivery: one worker per active subscription this process holds the lease of, sending the
// subscription's events one POST each, in seq order, and moving its cursor after each 2xx.
// A failure is retried (backoff with jitter) while later events wait; a subscription failing for
// longer than `disableAfterMs` is disabled. Everything a worker knows is re-read from storage, so
// a restart, a kill -9, or another replica taking over goes on from the stored cursor.
import { randomBytes } from "node:crypto";
import type { Core } from "../core";
import type { KeyRecord } from "../keys/model";
import type { DeliveryRecord, EventRecord, WebhookRecord } from "../storage/records";
import type { Storage } from "../storage/storage";
import { isoTime } from "../wire/time";
import { postWebhook } from "./post";
import {
  creatorProblem,
  isErasure,
  messageId,
  payload,
  signingSecrets,
  type TrailItem,
  trailFilter,
  trailItems,
} from "./service";
import { SharedTrail } from "./shared-trail";
import { signedHeaders } from "./signing";

export interface DeliveryOptions {
  allowPrivate: boolean;
  /** First retry after about this long; each next one after twice as long, up to retryMaxMs. */
  retryBaseMs: number;
  retryMaxMs: number;
  /** A subscription failing this long without a success is disabled. */
  disableAfterMs: number;
  connectTimeoutMs: number;
  answerTimeoutMs: number;
  /** Bytes of a receiver's answer read at most (kept, cut to 200 characters, in the error of a failure). */
  maxAnswerBytes: number;
  /** Read the trail and the subscriptions at least this often (other replicas' writes and edits). */
  pollMs: number;
  /** A delivery lease lasts this long unless renewed (a third of it): a dead replica's subscriptions move within it. */
  leaseMs: number;
}

/** The least time between two reads of the trail by one idle subscription (ms). */
export const scanSpacingMs = 5;
/**
 * The least time between two cursor writes of one subscription while it delivers (ms): each is a
 * transaction of its own beside the store path's (on LMDB, a turn of the one write lock and a
 * flush), so ten subscriptions delivering every event would otherwise write ten for each of its
 * commits. A crash sends what was delivered since the last write again, with the same ids.
 */
const flushSpacingMs = 250;
/** Delivery attempts the log keeps per subscription (storage keeps the newest 100). */
const keptDeliveries = 100;

/**
 * Events as they are now (storage.eventBySeq), one read for every subscription sending the same
 * event at about the same time: ten subscriptions of every event read it once, and its body is
 * serialized once (payload keeps the parts by the record read). A read is used again only until
 * this process commits (an erasure scrubs events in place: `commits` sees its commit before the
 * erasure is answered, where the notifier's ping may come a few ms later) and for at most `freshMs`
 * (another replica's commits): no older than the trail the subscriptions read.
 */
class CurrentEvents {
  private reads = new Map<number, Promise<EventRecord | undefined>>();
  private since = 0;
  private seen = 0;

  constructor(
    private readonly storage: Pick<Storage, "eventBySeq">,
    private readonly freshMs: number,
    private readonly commits: () => number,
  ) {}

  committed() {
    this.reads.clear();
  }

  get(seq: number) {
    const now = performance.now();
    const commits = this.commits();
    if (now - this.since > this.freshMs || commits !== this.seen) {
      this.reads.clear();
      this.since = now;
      this.seen = commits;
    }
    let r = this.reads.get(seq);
    if (!r) {
      const read = this.storage.eventBySeq(seq);
      // A failed read is not kept: the next subscription tries again.
      read.catch(() => this.reads.get(seq) === read && this.reads.delete(seq));
      this.reads.set(seq, read);
      r = read;
    }
    return r;
  }
}

/** Subscription URLs, parsed once. */
const urls = new Map<string, URL>();
const url = (raw: string) => {
  let u = urls.get(raw);
  if (!u) {
    if (urls.size > 1000) urls.clear();
    u = new URL(raw);
    urls.set(raw, u);
  }
  return u;
};

export const defaultDeliveryOptions: DeliveryOptions = {
  allowPrivate: false,
  retryBaseMs: 5000,
  retryMaxMs: 15 * 60_000,
  disableAfterMs: 72 * 3600_000,
  connectTimeoutMs: 5000,
  answerTimeoutMs: 10_000,
  maxAnswerBytes: 1024,
  pollMs: 500,
  leaseMs: 5000,
};

/**
 * The wait before retry `n` (1 for the first retry): retryBaseMs × 2^(n-1), at most retryMaxMs,
 * times a random factor from 0.5 to 1 (jitter, so receivers that come back are not hit at once).
 */
export function retryDelayMs(
  n: number,
  o: Pick<DeliveryOptions, "retryBaseMs" | "retryMaxMs">,
  random = Math.random(),
) {
  const full = Math.min(o.retryMaxMs, o.retryBaseMs * 2 ** Math.min(n - 1, 40));
  return Math.round(full * (0.5 + random / 2));
}

/** Running totals of this process, per subscription, for /metrics. */
export interface WebhookCounts {
  delivered: number;
  failed: number;
}

export interface Deliverer {
  /** Look at the subscriptions and the trail now (after a change through the API, or a commit). */
  wake(): void;
  counts(): ReadonlyMap<string, WebhookCounts>;
  /** Stops every worker (a POST in flight is cut) and gives their leases up. */
  stop(): Promise<void>;
}

type DelivererCore = Pick<Core, "storage" | "notifier" | "logger"> & {
  /** This process's commits so far, as soon as each is made (the delivery thread's shared count). */
  commits?: () => number;
};

/**
 * Starts delivering; `root` is the MEMD_API_KEY key (subscriptions it made deliver while it is
 * set). `beforeWrite` is called before each write of a subscription's state (delivery-thread.ts
 * sends the counts on then, so /metrics has them by the time the cursor has moved).
 */
export function startDeliverer(
  core: DelivererCore,
  root: KeyRecord | undefined,
  o: DeliveryOptions,
  beforeWrite: () => void = () => {},
): Deliverer {
  const { storage, logger } = core;
  const owner = `r_${randomBytes(8).toString("hex")}`;
  const workers = new Map<string, Worker>();
  const counts = new Map<string, WebhookCounts>();
  let stopped = false;
  let wakeSupervisor: (() => void) | undefined;

  const countOf = (id: string) => {
    let c = counts.get(id);
    if (!c) {
      c = { delivered: 0, failed: 0 };
      counts.set(id, c);
    }
    return c;
  };
  const wakeAll = () => {
    wakeSupervisor?.();
    for (const w of workers.values()) w.wake(true);
  };
  // A commit wakes the workers only (a flag each); the supervisor reads the subscriptions on changes and polls.
  const trail = new SharedTrail(storage, scanSpacingMs);
  const current = new CurrentEvents(storage, scanSpacingMs, core.commits ?? (() => 0));
  const unsubscribe = core.notifier.subscribeAll(() => {
    trail.committed();
    current.committed();
    for (const w of workers.values()) w.wake();
  });

  class Worker {
    readonly abort = new AbortController();
    private wakeUp: (() => void) | undefined;
    private dirty = false;
    private leased = false;
    private renewer: ReturnType<typeof setInterval> | undefined;
    /**
     * Successes not yet written: the cursor moves (with their log entries) in one transaction per
     * batch, while the next POSTs go on, so a commit's fsync is not paid per event. A crash before
     * the write only sends them again, with the same webhook-ids.
     */
    private delivered: DeliveryRecord[] = [];
    private flushing: Promise<void> | undefined;
    /** Set by a flush: the lease was lost (or the subscription deleted), or an edit through the API came. */
    private lost = false;
    private edited: WebhookRecord | undefined;
    /** The rev the successes waiting were planned under. */
    private rev = 0;
    /** An edit through this process's API since the subscription was last read. */
    private changed = false;
    readonly done: Promise<void>;

    constructor(readonly id: string) {
      this.done = this.run()
        .then(() => this.drain())
        .catch((e) => logger.error("webhook delivery failed", { webhook: id, error: String((e as Error)?.stack ?? e) }))
        .finally(() => {
          clearInterval(this.renewer);
          clearTimeout(this.flushTimer);
          workers.delete(id);
          if (this.leased) storage.releaseWebhook(id, owner).catch(() => {});
        });
    }

    get running() {
      return !this.abort.signal.aborted && !stopped;
    }

    private flushTimer: ReturnType<typeof setTimeout> | undefined;
    private flushedAt = Number.NEGATIVE_INFINITY;

    /** Writes the successes waiting, once flushSpacingMs has passed since the last write and none is in flight. */
    private flushSoon() {
      if (this.flushing || this.flushTimer || this.delivered.length === 0) return;
      const wait = flushSpacingMs - (performance.now() - this.flushedAt);
      if (wait <= 0) void this.flush();
      else
        this.flushTimer = setTimeout(() => {
          this.flushTimer = undefined;
          void this.flush();
        }, wait);
    }

    /**
     * Writes the successes waiting (one write in flight): the cursor moves past the last, and the
     * log gets the newest of them (it keeps the newest `keptDeliveries` only).
     */
    private flush(): Promise<void> {
      if (this.flushing || this.delivered.length === 0) return this.flushing ?? Promise.resolve();
      const batch = this.delivered.splice(0).slice(-keptDeliveries);
      const last = batch[batch.length - 1];
      this.flushedAt = performance.now();
      const rev = this.rev;
      beforeWrite();
      this.flushing = storage
        .updateWebhook(
          this.id,
          (cur) =>
            cur.rev === rev
              ? {
                  ...cur,
                  cursor: Math.max(cur.cursor, last.seq),
                  failingSince: null,
                  lastDeliveredAt: last.atMs,
                  lastError: null,
                }
              : undefined,
          { owner, deliveries: batch },
        )
        .then((next) => {
          if (!next) this.lost = true;
          else if (next.rev !== rev) this.edited = next;
        })
        .catch((e) => {
          this.lost = true;
          logger.error("webhook cursor write failed", { webhook: this.id, error: String(e) });
        })
        .finally(() => {
          this.flushing = undefined;
          if (!this.lost) this.flushSoon();
        });
      return this.flushing;
    }

    /** Resolves once every success so far is written (or the lease is lost). */
    private async drain() {
      while ((this.flushing || this.delivered.length > 0) && !this.lost) await this.flush();
    }

    /** Something to read: a commit, or (`changed`) an edit through the API, which is re-read at once. */
    wake(changed = false) {
      if (changed) this.changed = true;
      this.dirty = true;
      const w = this.wakeUp;
      this.wakeUp = undefined;
      w?.();
    }

    /** Waits up to `ms`, or less when woken or stopped. */
    private sleep(ms: number) {
      if (this.dirty || !this.running) {
        this.dirty = false;
        return Promise.resolve();
      }
      return new Promise<void>((resolve) => {
        const timer = setTimeout(() => this.wake(), ms);
        const onAbort = () => this.wake();
        this.abort.signal.addEventListener("abort", onAbort, { once: true });
        this.wakeUp = () => {
          clearTimeout(timer);
          this.abort.signal.removeEventListener("abort", onAbort);
          this.dirty = false;
          resolve();
        };
      });
    }

    /** Holds the lease (renewing it), or waits for it; false once stopped. */
    private async lease(): Promise<boolean> {
      while (this.running) {
        if (await storage.leaseWebhook(this.id, owner, o.leaseMs).catch(() => false)) {
          this.leased = true;
          logger.info("webhook delivery lease taken", { webhook: this.id, replica: owner, pid: process.pid });
          this.renewer = setInterval(() => {
            storage
              .leaseWebhook(this.id, owner, o.leaseMs)
              .catch(() => false)
              .then((held) => {
                if (!held) this.abort.abort();
              });
          }, o.leaseMs / 3);
          return true;
        }
        const w = await storage.getWebhook(this.id).catch(() => undefined);
        if (w?.state !== "active") return false;
        await this.sleep(o.leaseMs / 3);
      }
      return false;
    }

    private async run() {
      if (!(await this.lease())) return;
      let w = await storage.getWebhook(this.id);
      let pos = w?.cursor ?? 0;
      let buffer: TrailItem[] = [];
      let attempt = 0;
      let keyCheckedAt = 0;
      let cursorWrittenAt = 0;
      let scannedAt = 0;
      let readAt = performance.now();
      /** Takes `next` as the stored record: on an edit through the API (rev), the plan starts again from its cursor. */
      const adopt = (next: WebhookRecord) => {
        if (!w || next.rev !== w.rev) {
          pos = next.cursor;
          buffer = [];
          attempt = 0;
        }
        w = next;
        this.rev = next.rev;
      };
      if (w) this.rev = w.rev;
      while (this.running && w && w.state === "active") {
        if (this.lost) return;
        if (this.edited) {
          const next = this.edited;
          this.edited = undefined;
          await this.drain();
          adopt(next);
          continue;
        }
        const now = Date.now();
        if (now - keyCheckedAt > 1000) {
          keyCheckedAt = now;
          const problem = await creatorProblem(storage, root, w, now);
          if (problem) {
            await this.drain();
            const rev = w.rev;
            await storage.updateWebhook(this.id, (cur) =>
              cur.rev === rev && cur.state === "active"
                ? { ...cur, state: "paused", stateReason: problem, rev: cur.rev + 1, updatedAt: now }
                : undefined,
            );
            logger.warn("webhook paused", { webhook: this.id, reason: problem });
            return;
          }
        }
        if (buffer.length === 0) {
          scannedAt = performance.now();
          const page = await trail.after(pos, trailFilter(w), 100);
          if (page.events.length > 0 || page.erasures.length > 0) {
            // Committed is not yet durable on LMDB: never deliver what a crash could take back.
            await storage.durable();
            buffer = trailItems(page);
            pos = page.scannedTo;
            continue;
          }
          pos = page.scannedTo;
          await this.drain();
          if (this.lost) return;
          if (pos > w.cursor && Date.now() - cursorWrittenAt > 1000) {
            // Past events it does not want: the cursor moves too, so the lag and a restart skip them.
            cursorWrittenAt = Date.now();
            const rev = w.rev;
            const to = pos;
            const next = await storage.updateWebhook(
              this.id,
              (cur) => (cur.rev === rev && to > cur.cursor ? { ...cur, cursor: to } : undefined),
              { owner },
            );
            if (!next) return;
            adopt(next);
            continue;
          }
          await this.sleep(o.pollMs);
          if (!this.running) return;
          // Commits come in bursts: read the trail at most every few ms, so that a busy store
          // path wakes each subscription a bounded number of times a second, not once per commit.
          const since = performance.now() - scannedAt;
          if (since < scanSpacingMs) await Bun.sleep(scanSpacingMs - since);
          // The stored subscription (edits made on other replicas) at least every poll interval.
          if (this.changed || performance.now() - readAt >= o.pollMs) {
            this.changed = false;
            readAt = performance.now();
            const fresh = await storage.getWebhook(this.id);
            if (!fresh) return;
            adopt(fresh);
          }
          continue;
        }
        // An edit through the API (a rotated secret, a new filter or URL) is read before the next POST.
        if (this.changed) {
          this.changed = false;
          readAt = performance.now();
          const fresh = await storage.getWebhook(this.id);
          if (!fresh) return;
          adopt(fresh);
          continue;
        }
        const head = buffer[0];
        // As it is now: an erasure since it was read has scrubbed it.
        const e = isErasure(head) ? head : ((await current.get(head.seq)) ?? head);
        const id = messageId(w, e.seq);
        const body = payload(w, e);
        const started = performance.now();
        const r = await postWebhook(url(w.url), signedHeaders(signingSecrets(w), id, body), body, {
          connectTimeoutMs: o.connectTimeoutMs,
          answerTimeoutMs: o.answerTimeoutMs,
          allowPrivate: o.allowPrivate,
          maxAnswerBytes: o.maxAnswerBytes,
          signal: this.abort.signal,
        });
        if (r.error === "stopped" && !this.running) return;
        attempt++;
        const c = countOf(this.id);
        if (r.ok) c.delivered++;
        else c.failed++;
        const at = Date.now();
        const error =
          r.error === null ? null : r.answer ? `${r.error}: ${r.answer.slice(0, 200).replace(/\s+/g, " ")}` : r.error;
        const record: DeliveryRecord = {
          webhookId: this.id,
          seq: e.seq,
          messageId: id,
          eventKind: isErasure(e) ? "ERASURE" : e.event,
          namespace: e.namespace,
          atMs: at,
          attempt,
          status: r.status,
          ok: r.ok,
          error,
          durationMs: Math.round((performance.now() - started) * 10) / 10,
        };
        if (r.ok) {
          this.delivered.push(record);
          this.flushSoon();
          buffer.shift();
          attempt = 0;
          continue;
        }
        // A failure decides the subscription's state: written before anything else goes on.
        await this.drain();
        if (this.lost) return;
        const rev = w.rev;
        beforeWrite();
        const next = await storage.updateWebhook(
          this.id,
          (cur) => {
            if (cur.rev !== rev) return undefined;
            const failingSince = cur.failingSince ?? at;
            if (at - failingSince >= o.disableAfterMs)
              return {
                ...cur,
                state: "disabled",
                stateReason: `failing since ${isoTime(failingSince)} (more than ${Math.round(o.disableAfterMs / 3600_000)} h): ${error}`,
                failingSince,
                lastError: error,
                rev: cur.rev + 1,
                updatedAt: at,
              };
            return { ...cur, failingSince, lastError: error };
          },
          { owner, deliveries: [record] },
        );
        if (!next) return; // deleted, or the lease went to another replica
        const replanned = next.rev !== rev;
        adopt(next);
        if (replanned) {
          if (next.state !== "active") logger.warn("webhook disabled", { webhook: this.id, reason: next.stateReason });
          continue;
        }
        await this.sleep(retryDelayMs(attempt, o));
        const fresh = await storage.getWebhook(this.id);
        if (!fresh) return;
        adopt(fresh);
      }
    }
  }

  /** Starts a worker for each active subscription without one; the workers end themselves otherwise. */
  const supervise = async () => {
    while (!stopped) {
      try {
        for (const w of await storage.listWebhooks())
          if (w.state === "active" && !workers.has(w.id)) workers.set(w.id, new Worker(w.id));
      } catch (e) {
        logger.error("webhook supervisor failed", { error: String(e) });
      }
      // A stop during the read above found no sleep to cut short: it must not wait for one.
      if (stopped) break;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, o.pollMs * 2);
        wakeSupervisor = () => {
          clearTimeout(timer);
          wakeSupervisor = undefined;
          resolve();
        };
      });
    }
  };
  const supervising = supervise();

  return {
    wake: wakeAll,
    counts: () => counts,
    async stop() {
      stopped = true;
      unsubscribe();
      wakeSupervisor?.();
      for (const w of workers.values()) w.abort.abort();
      await Promise.all([...workers.values()].map((w) => w.done));
      await supervising;
    },
  };
}
