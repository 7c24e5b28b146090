// The PostgreSQL webhooks role: subscriptions as documents (webhooks.doc) with a delivery lease
// on their row, their delivery log, and the trail in seq order up to a horizon no transaction
// still running can commit below (see TrailHorizon).
import type { SQL } from "bun";
import type { DeliveryRecord, EventRecord, WebhookRecord } from "../records";
import type { TrailErasure, Webhooks } from "../storage";
import { patternParts } from "../trail-filter";
import { erasureOf, eventOf, json, type Row } from "./rows";
import type { PgState } from "./state";

/** Delivery attempts kept per subscription. */
const keptDeliveries = 100;

/** `prefix/` as a LIKE pattern that matches names starting with it. */
const likePrefix = (p: string) => `${p.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;

/** Log entries (oldest first, as attempted) as the log keeps them, newest first: a JSON string. */
const newestFirst = (ds: readonly DeliveryRecord[]) => JSON.stringify(ds.toReversed());

/** The path of a log's (newest first) first `keptDeliveries` entries. */
const keptPath = `$[0 to ${keptDeliveries - 1}]`;

export function pgWebhooks(s: PgState): Webhooks {
  const { sql, db, write } = s;
  const horizon = new TrailHorizon(sql, db);
  return {
    async insertWebhook(w) {
      await write((tx) => tx`INSERT INTO webhooks (id, doc) VALUES (${w.id}, ${JSON.stringify(w)})`);
    },

    async getWebhook(id) {
      const [r] = await db(() => sql`SELECT doc FROM webhooks WHERE id = ${id}`);
      return r ? json<WebhookRecord>(r.doc) : undefined;
    },

    async listWebhooks() {
      return (await db(() => sql`SELECT doc FROM webhooks ORDER BY id`)).map((r: Row) => json<WebhookRecord>(r.doc));
    },

    updateWebhook(id, change, options = {}) {
      return write(async (tx) => {
        const owner = options.owner ?? null;
        const [r] = await tx`SELECT doc FROM webhooks WHERE id = ${id}
            AND (${owner}::text IS NULL OR (lease_owner = ${owner} AND lease_until > (extract(epoch from clock_timestamp()) * 1000)::bigint))
            FOR UPDATE`;
        if (!r) return undefined;
        const w = json<WebhookRecord>(r.doc);
        const next = change(w);
        if (next) await tx`UPDATE webhooks SET doc = ${JSON.stringify(next)} WHERE id = ${id}`;
        const ds = options.deliveries ?? [];
        if (ds.length > 0)
          await tx`INSERT INTO webhook_logs (webhook_id, log) VALUES (${id}, ${newestFirst(ds)}::text::jsonb)
              ON CONFLICT (webhook_id) DO UPDATE SET log = jsonb_path_query_array(EXCLUDED.log || webhook_logs.log, ${keptPath}::jsonpath)`;
        return next ?? w;
      });
    },

    // One statement, whatever the number of subscriptions (storage.ts advanced() says what it does
    // to each): the rows first, then their logs' (one row each), as updateWebhook and
    // deleteWebhook take them. A doc is kept as a JSON string of the record's JSON (as
    // insertWebhook writes it).
    async advanceWebhooks(owner, moves) {
      if (moves.length === 0) return [];
      const rows = await db(
        () => sql`WITH m AS (
              SELECT * FROM json_to_recordset(${JSON.stringify(moves.map((m) => ({ id: m.id, rev: m.rev, cursor: m.cursor, newest: m.deliveries.toReversed() })))}::text::json)
                AS t(id text, rev bigint, cursor bigint, newest json)),
            cur AS (
              SELECT w.id, (w.doc #>> '{}')::jsonb AS d, m.rev, m.cursor, m.newest, json_array_length(m.newest) AS k
                FROM webhooks w JOIN m ON m.id = w.id
                WHERE w.lease_owner = ${owner} AND w.lease_until > (extract(epoch from clock_timestamp()) * 1000)::bigint
                ORDER BY w.id FOR UPDATE OF w),
            moved AS (
              UPDATE webhooks w SET doc = to_json((CASE
                  WHEN (c.d->>'rev')::bigint <> c.rev THEN c.d
                  WHEN c.k = 0 THEN c.d || jsonb_build_object('cursor', GREATEST((c.d->>'cursor')::bigint, c.cursor))
                  ELSE c.d || jsonb_build_object('cursor', GREATEST((c.d->>'cursor')::bigint, c.cursor),
                    'failingSince', NULL, 'lastError', NULL,
                    'lastDeliveredAt', (c.newest->0->>'atMs')::bigint) END)::text)
                FROM cur c WHERE w.id = c.id
                RETURNING w.id, w.doc),
            logged AS (
              INSERT INTO webhook_logs (webhook_id, log)
                SELECT c.id, jsonb_path_query_array(c.newest::jsonb, ${keptPath}::jsonpath) FROM cur c WHERE c.k > 0 ORDER BY c.id
                ON CONFLICT (webhook_id) DO UPDATE SET log = jsonb_path_query_array(EXCLUDED.log || webhook_logs.log, ${keptPath}::jsonpath))
          SELECT id, doc FROM moved`,
      );
      const byId = new Map<string, WebhookRecord>(rows.map((r: Row) => [r.id, json<WebhookRecord>(r.doc)]));
      return moves.map((m) => byId.get(m.id));
    },

    deleteWebhook(id) {
      // The subscription's row first, then its log's, in the order a delivery's write takes them
      // (updateWebhook): the other order deadlocks with a delivery writing its log meanwhile.
      return write(async (tx) => {
        const gone = (await tx`DELETE FROM webhooks WHERE id = ${id} RETURNING id`).length === 1;
        await tx`DELETE FROM webhook_logs WHERE webhook_id = ${id}`;
        return gone;
      });
    },

    async webhookDeliveries(id, limit) {
      const [r] = await db(
        () => sql`SELECT jsonb_path_query_array(log, ${`$[0 to ${Math.max(0, limit - 1)}]`}::jsonpath) AS log
            FROM webhook_logs WHERE webhook_id = ${id}`,
      );
      return r && limit > 0 ? json<DeliveryRecord[]>(r.log) : [];
    },

    async trailAfter(afterSeq, filter, limit) {
      const safe = await horizon.get();
      if (safe <= afterSeq) return { events: [], erasures: [], scannedTo: afterSeq };
      const { all, exact, prefixes } = patternParts(filter.namespaces);
      const rows = await db(
        () => sql`SELECT * FROM events WHERE seq > ${afterSeq} AND seq <= ${safe}
            AND (${all} OR namespace = ANY(${sql.array(exact, "text")}::text[])
                 OR namespace LIKE ANY(${sql.array(prefixes.map(likePrefix), "text")}::text[]))
            AND (cardinality(${sql.array([...filter.kinds], "text")}::text[]) = 0
                 OR event = ANY(${sql.array([...filter.kinds], "text")}::text[]))
            ORDER BY seq LIMIT ${limit}`,
      );
      const events: EventRecord[] = rows.map(eventOf);
      // A full page ends at its last event; a short one saw everything up to the horizon.
      const scannedTo = events.length === limit ? events[events.length - 1].seq : safe;
      const erased = await db(
        () => sql`SELECT * FROM erasures WHERE seq > ${afterSeq} AND seq <= ${scannedTo}
            AND (${all} OR namespace = ANY(${sql.array(exact, "text")}::text[])
                 OR namespace LIKE ANY(${sql.array(prefixes.map(likePrefix), "text")}::text[]))
            ORDER BY seq`,
      );
      const erasures: TrailErasure[] = erased.map((r: Row) => ({ ...erasureOf(r), seq: Number(r.seq) }));
      return { events, erasures, scannedTo };
    },

    async eventsBySeq(seqs) {
      const rows = await db(() => sql`SELECT * FROM events WHERE seq = ANY(${sql.array(seqs, "int8")}::bigint[])`);
      const bySeq = new Map<number, EventRecord>();
      for (const r of rows) {
        const e = eventOf(r);
        bySeq.set(e.seq, e);
      }
      return seqs.map((seq) => bySeq.get(seq));
    },

    async erasuresCommitted() {
      const [r] = await db(() => sql`SELECT n FROM erasures_committed WHERE id = 1`);
      return Number(r.n);
    },

    // Leases are timed by the database's clock (clock_timestamp), whatever the replicas' own say.
    async leaseWebhook(id, owner, ttlMs) {
      const rows = await db(
        () => sql`UPDATE webhooks SET lease_owner = ${owner}, lease_until = (extract(epoch from clock_timestamp()) * 1000)::bigint + ${ttlMs}
            WHERE id = ${id} AND (lease_owner IS NULL OR lease_owner = ${owner} OR lease_until <= (extract(epoch from clock_timestamp()) * 1000)::bigint)
            RETURNING id`,
      );
      return rows.length === 1;
    },

    async renewWebhookLeases(ids, owner, ttlMs) {
      if (ids.length === 0) return new Set();
      const rows = await db(
        () => sql`UPDATE webhooks SET lease_until = (extract(epoch from clock_timestamp()) * 1000)::bigint + ${ttlMs}
            WHERE id = ANY(${sql.array([...ids], "text")}::text[]) AND lease_owner = ${owner}
            RETURNING id`,
      );
      return new Set(rows.map((r: Row) => r.id as string));
    },

    async releaseWebhook(id, owner) {
      await db(
        () =>
          sql`UPDATE webhooks SET lease_owner = NULL, lease_until = NULL WHERE id = ${id} AND lease_owner = ${owner}`,
      );
    },
  };
}

/**
 * The seq up to which the trail is final: every event with a seq at or below it is committed, or
 * never will be. Seqs are taken in each namespace's clock order, so across namespaces a later seq
 * may commit before an earlier one; a reader by seq must not pass a seq still in flight.
 *
 * Mostly the seqs present without a gap above the last horizon: a commit out of order across
 * namespaces only holds it until the earlier one commits. A gap that stays (a transaction that
 * took seqs and rolled back) is passed this way: read the sequence's last value, then take a
 * transaction id N (every transaction that took a seq up to that value had its id before, from
 * its first write, the clock row); once a later snapshot shows no transaction below N running,
 * every seq up to that value is final. A long transaction (a smart store holding its entity's
 * lock row) delays only that second way, so only a gap, never the usual flow.
 */
class TrailHorizon {
  private safe = 0;
  private candidate: { hi: number; n: string } | undefined;
  private running: Promise<number> | undefined;

  constructor(
    private readonly sql: SQL,
    private readonly db: PgState["db"],
  ) {}

  /** The horizon now (one computation at a time, shared by every caller). */
  get(): Promise<number> {
    this.running ??= this.step().finally(() => {
      this.running = undefined;
    });
    return this.running;
  }

  /** Whether no transaction with an id below `n` is running, as a new snapshot sees it. */
  private async ended(n: string): Promise<boolean> {
    const [r] = await this.db(
      () => this.sql`SELECT pg_snapshot_xmax(s) > ${n}::xid8
            AND NOT EXISTS (SELECT 1 FROM pg_snapshot_xip(s) AS x WHERE x < ${n}::xid8) AS ended
          FROM pg_current_snapshot() AS s`,
    );
    return r.ended === true;
  }

  private async step(): Promise<number> {
    const { sql, db } = this;
    const page = 2000;
    // Erasures take seqs too (erasure.ts).
    const seqs = await db(
      () => sql`(SELECT seq FROM events WHERE seq > ${this.safe} ORDER BY seq LIMIT ${page})
          UNION ALL (SELECT seq FROM erasures WHERE seq > ${this.safe} ORDER BY seq LIMIT ${page})
          ORDER BY seq LIMIT ${page}`,
    );
    let i = 0;
    while (i < seqs.length && Number(seqs[i].seq) === this.safe + 1) {
      this.safe++;
      i++;
    }
    if (this.candidate && this.candidate.hi <= this.safe) this.candidate = undefined;
    if (this.candidate && (await this.ended(this.candidate.n))) {
      this.safe = Math.max(this.safe, this.candidate.hi);
      this.candidate = undefined;
    }
    // A gap before the seqs present, or a long way to walk: the second way.
    if (!this.candidate && (i < seqs.length || seqs.length === page)) {
      const [q] = await db(() => sql`SELECT last_value, is_called FROM event_seq`);
      const hi = q.is_called ? Number(q.last_value) : 0;
      if (hi > this.safe) {
        const [x] = await db(() => sql`SELECT pg_current_xact_id()::text AS n`);
        this.candidate = { hi, n: String(x.n) };
        if (await this.ended(this.candidate.n)) {
          this.safe = hi;
          this.candidate = undefined;
        }
      }
    }
    return this.safe;
  }
}
