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
import { Pace } from "./pace";
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
  /** While stores come on a contended CPU, the share of a core deliveries take at most (pace.ts; 1: no limit). */
  busyShare: number;
}

/** The least time between two reads of the trail by one idle subscription (ms). */
export const scanSpacingMs = 5;
/**
 * PostgreSQL: while commits come back to back (stores at full speed), the shared stretch of the
 * trail is read from the database at most this often (ms), not at every scan spacing: each read
 * is three statements (the horizon, the events, the erasures) on the backends the stores wait
 * on. A commit after a pause is still read at once; an event waits this long more at most.
 */
const streakReadMs = 25;
/**
 * The most (ms): a subscription whose reads found nothing to send reads twice as far apart each
 * time, up to this, on a grid every subscription shares (so that they still share one read of
 * storage). Ten subscriptions to namespaces nobody writes otherwise read the trail, and wake, at
 * every scan spacing while stores run elsewhere; an event one of them wants waits this long more
 * at most.
 */
const idleScanMs = 40;
/**
 * The least time between two cursor writes while subscriptions deliver (ms): one write moves
 * every subscription's cursor and logs their successes (one statement on PostgreSQL, one
 * transaction on LMDB), beside the store path's; written per event, ten subscriptions delivering
 * every event would write ten for each of its commits. A crash sends what was delivered since the
 * last write again, with the same ids. Once a second, not every 250 ms: the logs' rows (the newest
 * 100 attempts of each) were most of what PostgreSQL wrote for ten subscriptions delivering.
 */
const flushSpacingMs = 1000;
/**
 * A subscription that has sent everything there is has its moves written this soon after the last
 * write: what it delivered shows in its log and cursor at once, while a backlog still waits for
 * the second (at most 20 writes a second for subscriptions catching up over and over).
 */
const caughtUpFlushMs = 50;
/** Delivery attempts the log keeps per subscription (storage keeps the newest 100). */
const keptDeliveries = 100;

/** Events read again at most at once (the next ones a subscription will send). */
const eventsRead = 20;

/**
 * Whether events read from storage at some moment are still as they are, where another process's
 * erasure may have scrubbed them since (PostgreSQL replicas): storage's count of committed
 * erasures, one read at a time, a read begun at most `freshMs` ago answering every caller. What
 * was read after a read that gave the count now, checked against one begun within `freshMs`, is
 * as it was then; an erasure that commits later with a lower seq counts as well.
 */
class ErasureWatch {
  private count: number | undefined;
  /** When the first read that gave `count` had ended: reads begun since are current while it holds. */
  private since = Number.POSITIVE_INFINITY;
  private startedAt = Number.NEGATIVE_INFINITY;
  private reading: Promise<void> | undefined;

  constructor(
    private readonly storage: Pick<Storage, "erasuresCommitted">,
    private readonly freshMs: number,
  ) {}

  /** Whether no erasure has committed since `readAt` (performance.now() when a read of storage began), as of freshMs ago at most. */
  async unchangedSince(readAt: number): Promise<boolean> {
    // `since` only moves on: what was read before it is not vouched for.
    if (this.count !== undefined && readAt < this.since) return false;
    await this.fresh();
    return readAt >= this.since;
  }

  private async fresh() {
    for (;;) {
      const recent = performance.now() - this.startedAt <= this.freshMs;
      if (this.reading) {
        await this.reading;
        if (recent) return;
        continue;
      }
      if (recent) return;
      this.startedAt = performance.now();
      this.reading = this.storage
        .erasuresCommitted()
        .then(
          (n) => {
            if (n === this.count) return;
            this.count = n;
            this.since = performance.now();
          },
          () => {
            // Unknown: nothing read so far is vouched for (the events are read again).
            this.count = undefined;
            this.since = Number.POSITIVE_INFINITY;
          },
        )
        .finally(() => {
          this.reading = undefined;
        });
    }
  }
}

/**
 * Events as they are now (storage.eventsBySeq), for the POSTs whose trail read is older than the
 * last scrubbing commit of this process (an erasure scrubs events in place; `scrubs` counts it
 * before the erasure is answered) or, on PostgreSQL, older than `freshMs` with an erasure
 * committed since (another replica's; `watch`). One statement reads a subscription's next
 * events, and every subscription sending the same events uses that read (its body is serialized
 * once: payload keeps the parts by the record read), under the same two bounds.
 */
class CurrentEvents {
  private reads = new Map<number, Promise<EventRecord | undefined>>();
  /** When the reads kept began, at the earliest, and this process's scrubs then. */
  private since = 0;
  private seen: number;

  constructor(
    private readonly storage: Pick<Storage, "eventsBySeq">,
    private readonly freshMs: number,
    private readonly scrubs: () => number,
    private readonly watch: ErasureWatch | undefined,
  ) {
    this.seen = scrubs();
  }

  /** Whether what was read from storage at `at` is as it is now, this process's scrubs aside. */
  private async unchanged(at: number) {
    if (performance.now() - at <= this.freshMs) return true;
    return this.watch !== undefined && (await this.watch.unchangedSince(at));
  }

  /** Whether items read at `readAt` (performance.now()), with `scrubs` as it was then, are as they are now. */
  async current(readAt: number, scrubs: number) {
    return scrubs === this.scrubs() && (await this.unchanged(readAt));
  }

  /** `seq` as it is now; `next`: the seqs to be asked for next, read in the same statement. */
  async get(seq: number, next: () => number[]) {
    const since = this.since;
    const scrubs = this.scrubs();
    const kept = scrubs === this.seen && this.reads.size <= 10 * eventsRead && (await this.unchanged(since));
    // Unless another caller started afresh meanwhile.
    if (!kept && this.since === since) {
      this.reads.clear();
      this.since = performance.now();
      this.seen = scrubs;
    }
    const r = this.reads.get(seq);
    if (r) return r;
    const seqs = [seq];
    for (const s of next()) if (seqs.length < eventsRead && !this.reads.has(s)) seqs.push(s);
    const read = this.storage.eventsBySeq(seqs);
    seqs.forEach((s, i) => {
      const one = read.then((events) => events[i]);
      // A failed read is not kept: the next subscription tries again.
      one.catch(() => this.reads.get(s) === one && this.reads.delete(s));
      this.reads.set(s, one);
    });
    return this.reads.get(seq) as Promise<EventRecord | undefined>;
  }
}

/**
 * The stored subscriptions, one read (listWebhooks) for every worker and the supervisor: a read
 * begun at or after the time a caller asks for answers it, so ten workers polling for edits made
 * on other replicas make one statement, not ten.
 */
class StoredSubscriptions {
  private last: { at: number; byId: Map<string, WebhookRecord> } | undefined;
  private reading: { at: number; read: Promise<Map<string, WebhookRecord>> } | undefined;

  constructor(private readonly storage: Pick<Storage, "listWebhooks">) {}

  /** Every subscription, as read by a read begun at `since` (performance.now()) or later. */
  all(since: number): Promise<Map<string, WebhookRecord>> {
    if (this.last && this.last.at >= since) return Promise.resolve(this.last.byId);
    if (this.reading && this.reading.at >= since) return this.reading.read;
    const at = performance.now();
    const read = this.storage.listWebhooks().then((ws) => {
      const byId = new Map(ws.map((w) => [w.id, w]));
      if (!this.last || this.last.at < at) this.last = { at, byId };
      return byId;
    });
    this.reading = { at, read };
    const done = () => {
      if (this.reading?.read === read) this.reading = undefined;
    };
    read.then(done, done);
    return read;
  }

  /** Subscription `id` (undefined: deleted), as read at `since` or later. */
  async get(id: string, since: number) {
    return (await this.all(since)).get(id);
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
  busyShare: 1,
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

/** A span of time for people: 72 h, 1.5 min, 6 s. */
const duration = (ms: number) =>
  ms >= 3600_000
    ? `${+(ms / 3600_000).toFixed(1)} h`
    : ms >= 60_000
      ? `${+(ms / 60_000).toFixed(1)} min`
      : `${+(ms / 1000).toFixed(1)} s`;

/** Running totals of this process, per subscription, for /metrics. */
export interface WebhookCounts {
  delivered: number;
  failed: number;
}

export interface Deliverer {
  /** Look at the subscriptions and the trail now (after a change through the API, or a commit). */
  wake(): void;
  /** A key was revoked: each subscription checks its maker's key before its next POST. Called before the revocation is answered. */
  keysChanged(): void;
  counts(): ReadonlyMap<string, WebhookCounts>;
  /** Stops every worker (a POST in flight is cut) and gives their leases up. */
  stop(): Promise<void>;
}

type DelivererCore = Pick<Core, "storage" | "notifier" | "logger"> & {
  /**
   * This process's scrubbing commits so far (erasures), as soon as each is made (the delivery
   * thread's shared count); without it, counted from the notifier's pings.
   */
  scrubs?: () => number;
  /** The request thread's count of its commits (the delivery thread's shared count): deliveries give way while it moves (pace.ts). */
  commits?: () => number;
  /**
   * This process's key revocations so far (the delivery thread's shared count): a subscription
   * checks its maker's key again before its next POST when it moves; without it, counted from
   * `keysChanged()`.
   */
  keyChanges?: () => number;
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

  /**
   * Cursor moves not yet written, by worker: successes move it (with their log entries), and so
   * do events passed that a subscription does not want. Written together while the POSTs go on,
   * flushSpacingMs after the last write at the latest, and at once when a worker drains (before
   * it writes a failure or takes an edit, and when it stops).
   */
  const moves = new Map<Worker, { rev: number; cursor: number; deliveries: DeliveryRecord[] }>();
  let flushing: Promise<void> | undefined;
  let flushTimer: ReturnType<typeof setTimeout> | undefined;
  let flushDueAt = Number.POSITIVE_INFINITY;
  let flushedAt = Number.NEGATIVE_INFINITY;
  /** The least spacing asked for by the moves waiting (flushSpacingMs, or caughtUpFlushMs). */
  let spacing = flushSpacingMs;
  const move = (w: Worker, cursor: number, delivery?: DeliveryRecord) => {
    let m = moves.get(w);
    if (!m || m.rev !== w.rev) {
      // A move is written under the rev it was planned under: one planned before an edit (a
      // replay moves the cursor back) would be refused, so only its log entries are kept.
      m = { rev: w.rev, cursor, deliveries: m?.deliveries ?? [] };
      moves.set(w, m);
    }
    m.cursor = Math.max(m.cursor, cursor);
    if (delivery) m.deliveries.push(delivery);
    // Only the newest are logged: a write slow to come keeps no more.
    if (m.deliveries.length > 2 * keptDeliveries) m.deliveries.splice(0, keptDeliveries);
    flushSoon();
  };
  const flushSoon = (within = flushSpacingMs) => {
    spacing = Math.min(spacing, within);
    if (flushing || moves.size === 0) return;
    const due = flushedAt + spacing;
    if (flushTimer) {
      if (flushDueAt <= due) return;
      clearTimeout(flushTimer);
      flushTimer = undefined;
    }
    const wait = due - performance.now();
    if (wait <= 0) return void flush();
    flushDueAt = due;
    flushTimer = setTimeout(() => {
      flushTimer = undefined;
      void flush();
    }, wait);
  };
  /** Writes the moves waiting (one write in flight); each log gets the newest `keptDeliveries` only. */
  const flush = (): Promise<void> => {
    if (flushing || moves.size === 0) return flushing ?? Promise.resolve();
    clearTimeout(flushTimer);
    flushTimer = undefined;
    const batch = [...moves].map(([w, m]) => ({
      w,
      move: { id: w.id, rev: m.rev, cursor: m.cursor, deliveries: m.deliveries.slice(-keptDeliveries) },
    }));
    moves.clear();
    spacing = flushSpacingMs;
    flushedAt = performance.now();
    beforeWrite();
    flushing = storage
      .advanceWebhooks(
        owner,
        batch.map((b) => b.move),
      )
      .then((next) => {
        for (const [i, b] of batch.entries()) b.w.written(next[i], b.move.rev);
      })
      .catch((e) => {
        logger.error("webhook cursor write failed", { error: String(e) });
        for (const b of batch) b.w.written(undefined, b.move.rev);
      })
      .finally(() => {
        flushing = undefined;
        flushSoon();
      });
    return flushing;
  };

  /**
   * The workers holding their lease, renewed together (one statement on PostgreSQL) every third
   * of the lease: a worker whose lease was not renewed (taken over, the subscription deleted, or
   * the renewal failed) stops.
   */
  const leased = new Set<Worker>();
  let renewer: ReturnType<typeof setInterval> | undefined;
  const renewLeases = async () => {
    const holding = [...leased];
    const renewed = await storage
      .renewWebhookLeases(
        holding.map((w) => w.id),
        owner,
        o.leaseMs,
      )
      .catch(() => new Set<string>());
    for (const w of holding) if (!renewed.has(w.id) && leased.has(w)) w.abort.abort();
  };
  const holdLease = (w: Worker) => {
    leased.add(w);
    renewer ??= setInterval(() => void renewLeases(), o.leaseMs / 3);
  };
  /** Whether `w` held its lease. */
  const dropLease = (w: Worker) => {
    const held = leased.delete(w);
    if (leased.size === 0) {
      clearInterval(renewer);
      renewer = undefined;
    }
    return held;
  };

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
  let pinged = 0;
  const scrubs = core.scrubs ?? (() => pinged);
  let revoked = 0;
  const keyChanges = core.keyChanges ?? (() => revoked);
  // On LMDB every write is this process's (one process owns a data dir): only its scrubs change
  // events read. On PostgreSQL another replica's erasure may too: events read are trusted 5 ms,
  // and after that while the erasure count read within 5 ms is the one they were read under.
  const freshMs = storage.sharedWithReplicas ? scanSpacingMs : Number.POSITIVE_INFINITY;
  const pace = core.commits ? new Pace(core.commits, o.busyShare) : undefined;
  const trail = new SharedTrail(storage, scanSpacingMs, scrubs, storage.sharedWithReplicas ? streakReadMs : 0);
  const watch = storage.sharedWithReplicas ? new ErasureWatch(storage, scanSpacingMs) : undefined;
  const current = new CurrentEvents(storage, freshMs, scrubs, watch);
  const subscriptions = new StoredSubscriptions(storage);
  const unsubscribe = core.notifier.subscribeAll((scrubbed) => {
    if (scrubbed) pinged++;
    trail.committed();
    for (const w of workers.values()) w.wake();
  });

  class Worker {
    readonly abort = new AbortController();
    private wakeUp: (() => void) | undefined;
    private dirty = false;
    /** Set by a cursor write: the lease was lost (or the subscription deleted), or an edit through the API came. */
    private lost = false;
    private edited: WebhookRecord | undefined;
    /** The rev of the plan under way (the stored record's as last adopted): moves are made under it. */
    rev = 0;
    /** An edit through this process's API since the subscription was last read, and when it was told. */
    private changed = false;
    private changedAt = 0;
    readonly done: Promise<void>;

    constructor(readonly id: string) {
      this.done = this.run()
        .then(() => this.drain())
        .catch((e) => logger.error("webhook delivery failed", { webhook: id, error: String((e as Error)?.stack ?? e) }))
        .finally(() => {
          const held = dropLease(this);
          moves.delete(this);
          workers.delete(id);
          if (held) storage.releaseWebhook(id, owner).catch(() => {});
        });
    }

    get running() {
      return !this.abort.signal.aborted && !stopped;
    }

    /** What a cursor write answered for this worker's move (planned under `rev`). */
    written(next: WebhookRecord | undefined, rev: number) {
      if (!next) this.lost = true;
      else if (next.rev !== rev) this.edited = next;
    }

    /** Resolves once every move so far is written (or the lease is lost). */
    private async drain() {
      while ((flushing || moves.has(this)) && !this.lost) await flush();
    }

    /** Something to read: a commit, or (`changed`) an edit through the API, which is re-read at once. */
    wake(changed = false) {
      if (changed) {
        this.changed = true;
        this.changedAt = performance.now();
      }
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
          logger.info("webhook delivery lease taken", { webhook: this.id, replica: owner, pid: process.pid });
          holdLease(this);
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
      /** When the buffer's oldest item was read, and this process's scrubs then. */
      let bufferReadAt = 0;
      let bufferScrubs = 0;
      const nextSeqs = () => {
        const seqs: number[] = [];
        for (let i = 1; i < buffer.length && seqs.length < eventsRead; i++)
          if (!isErasure(buffer[i])) seqs.push(buffer[i].seq);
        return seqs;
      };
      let attempt = 0;
      let keyCheckedAt = 0;
      /** The maker key's expiry, and the count of revocations, at its last check. */
      let keyExpiresAt = 0;
      let keyChangesSeen = keyChanges();
      let cursorWrittenAt = 0;
      /** The furthest cursor move made while idle. */
      let movedTo = 0;
      let scannedAt = 0;
      /** Reads of the trail in a row that found nothing to send. */
      let emptyScans = 0;
      let readAt = performance.now();
      /** Takes `next` as the stored record: on an edit through the API (rev), the plan starts again from its cursor. */
      const adopt = (next: WebhookRecord) => {
        if (!w || next.rev !== w.rev) {
          pos = next.cursor;
          movedTo = 0;
          buffer = [];
          attempt = 0;
          // Its namespaces may have changed (an admin's edit): the maker key must cover them before a POST.
          keyCheckedAt = 0;
        }
        w = next;
        this.rev = next.rev;
      };
      /**
       * A record from the shared reads (StoredSubscriptions): one begun before this worker took a
       * newer record from a cursor write (an edit) is older, and left, or the plan would go back
       * to the old URL, filter or cursor until the next cursor write is refused.
       */
      const adoptShared = (next: WebhookRecord) => {
        if (!w || next.rev >= w.rev) adopt(next);
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
        // At least every second (a key revoked by another process or replica), and at once after
        // a revocation through this process or at the key's expiry: nothing is POSTed after either.
        if (now - keyCheckedAt > 1000 || now >= keyExpiresAt || keyChanges() !== keyChangesSeen) {
          keyCheckedAt = now;
          keyChangesSeen = keyChanges();
          const { problem, expiresAt } = await creatorProblem(storage, root, w, now);
          keyExpiresAt = expiresAt;
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
          const scrubbed = scrubs();
          const page = await trail.after(pos, trailFilter(w), 100);
          if (page.events.length > 0 || page.erasures.length > 0) {
            emptyScans = 0;
            // Committed is not yet durable on LMDB: never deliver what a crash could take back.
            await storage.durable();
            buffer = trailItems(page);
            bufferReadAt = page.readAt;
            bufferScrubs = scrubbed;
            pos = page.scannedTo;
            continue;
          }
          pos = page.scannedTo;
          emptyScans++;
          if (this.lost) return;
          // Caught up: what it sent is written soon, not with the next second's batch.
          if (emptyScans === 1 && moves.has(this)) flushSoon(caughtUpFlushMs);
          // Past events it does not want: the cursor moves too (with the next cursor write), so
          // the lag and a restart skip them.
          if (pos > Math.max(w.cursor, movedTo) && Date.now() - cursorWrittenAt > 1000) {
            cursorWrittenAt = Date.now();
            movedTo = pos;
            move(this, pos);
          }
          // A commit the shared trail put off (a streak) is read when due, not at the next poll.
          await this.sleep(Math.min(o.pollMs, trail.unreadDueIn() ?? o.pollMs));
          if (!this.running) return;
          // Commits come in bursts: read the trail at most every few ms, so that a busy store
          // path wakes each subscription a bounded number of times a second, not once per commit;
          // further apart while there is nothing for it (idleScanMs).
          const spacing = Math.min(idleScanMs, scanSpacingMs * 2 ** Math.min(emptyScans - 1, 8));
          const now = performance.now();
          if (now - scannedAt < spacing) await Bun.sleep(spacing - (now % spacing));
          // The stored subscription (edits made on other replicas) at least every poll interval.
          if (this.changed || performance.now() - readAt >= o.pollMs) {
            // After the edit told of; else one read by any worker within half a poll interval.
            const since = this.changed ? this.changedAt : performance.now() - o.pollMs / 2;
            this.changed = false;
            readAt = since;
            const fresh = await subscriptions.get(this.id, since);
            if (!fresh) return;
            adoptShared(fresh);
          }
          continue;
        }
        // An edit through the API (a rotated secret, a new filter or URL) is read before the next POST.
        if (this.changed) {
          const since = this.changedAt;
          this.changed = false;
          readAt = performance.now();
          const fresh = await subscriptions.get(this.id, since);
          if (!fresh) return;
          adoptShared(fresh);
          continue;
        }
        await pace?.turn();
        const head = buffer[0];
        // As it is now: an erasure since it was read has scrubbed it.
        const scrubsAtRead = scrubs();
        const e =
          isErasure(head) || (await current.current(bufferReadAt, bufferScrubs))
            ? head
            : ((await current.get(head.seq, nextSeqs)) ?? head);
        // A revocation answered, or the key's expiry passed, since the check above: checked again first.
        const keyAsChecked = () => keyChanges() === keyChangesSeen && Date.now() < keyExpiresAt;
        if (!keyAsChecked()) continue;
        const id = messageId(w, e.seq);
        const body = payload(w, e);
        const started = performance.now();
        const r = await postWebhook(url(w.url), signedHeaders(signingSecrets(w), id, body), body, {
          connectTimeoutMs: o.connectTimeoutMs,
          answerTimeoutMs: o.answerTimeoutMs,
          allowPrivate: o.allowPrivate,
          maxAnswerBytes: o.maxAnswerBytes,
          signal: this.abort.signal,
          // An erasure or a revocation answered while the connection was being made (a name's
          // lookup, a TLS handshake): nothing sent, read again.
          stillCurrent: () => keyAsChecked() && (isErasure(e) || scrubs() === scrubsAtRead),
        });
        if (r.error === "stopped" && !this.running) return;
        if (r.stale) continue;
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
          move(this, e.seq, record);
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
                stateReason: `failing since ${isoTime(failingSince)} (more than ${duration(o.disableAfterMs)}): ${error}`,
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
        // The retry waits its whole delay: commits do not cut it short (a failing receiver would be
        // sent the event again at every store); a stop or an edit of this subscription does.
        const retryAt = performance.now() + retryDelayMs(attempt, o);
        for (let left = retryAt - performance.now(); left > 0 && this.running; left = retryAt - performance.now()) {
          await this.sleep(left);
          if (!this.changed) continue;
          this.changed = false;
          const fresh = await storage.getWebhook(this.id);
          if (!fresh) return;
          adopt(fresh);
          if (fresh.rev !== rev) break;
        }
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
        for (const w of (await subscriptions.all(performance.now())).values())
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
    keysChanged() {
      revoked++;
      for (const w of workers.values()) w.wake();
    },
    counts: () => counts,
    async stop() {
      stopped = true;
      unsubscribe();
      wakeSupervisor?.();
      for (const w of workers.values()) w.abort.abort();
      await Promise.all([...workers.values()].map((w) => w.done));
      await supervising;
      clearTimeout(flushTimer);
    },
  };
}
