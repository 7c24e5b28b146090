// PostgreSQL writes: how a transaction is run (pipelined on one reserved connection, its settings
// per transaction, its deadline before COMMIT and its own bound after), and apply's plan for a
// batch of calls written with one statement per table.
//
// Works behind a pooler in transaction mode (PgBouncer): every setting is SET LOCAL inside the
// transaction, nothing is kept in a session (no session advisory lock, LISTEN or temp table),
// and named prepared statements are left out when the pooler cannot keep them (openPostgres).
import type { ReservedSQL, SQL, TransactionSQL } from "bun";
import {
  checkKeyFree,
  entityGuardOf,
  keyedOutcome,
  keyOfOp,
  planOp,
  stampFloor,
  targetIsLive,
  targetOf,
  vectorOf,
} from "../ops";
import type { EventRecord, MemoryRecord } from "../records";
import {
  type Applied,
  IdempotencyKeyTaken,
  type IdempotencyRecord,
  type MemoryOp,
  StorageError,
  WriteConflict,
} from "../storage";
import { columnList, columns, eventJson, memoryJson, memoryOf, type Row } from "./rows";
import { addIndexWrites, type IndexTouch, indexChange, Statement, sendIndexDeletes } from "./search";

/** A connection in a transaction: queries sent on it run in order, and may be sent before the last one answered. */
export type Conn = ReservedSQL | TransactionSQL;

export const unavailableMessage = "the database is unavailable; try again shortly";
export const unknownMessage =
  "the database connection was lost while the change was being committed, so it may or may not have been made; retry with the same Idempotency-Key, which makes it exactly once";

/** SQLSTATE classes that mean "the database is not there right now", not "the request is wrong". */
// 25006: a read-only transaction, as on a standby after a failover.
const unavailableStates = /^(08|57P0|57014|53300|55P03|40001|40P01|25006)/;

/** Maps a driver error to a StorageError when it is about the database, not about the query. */
export function storageError(e: unknown): unknown {
  if (e instanceof StorageError || e instanceof IdempotencyKeyTaken) return e;
  const err = e as { code?: string; errno?: string; message?: string };
  const state = String(err?.errno ?? "");
  if (state === "53100") return new StorageError("storage_full", "the database is out of disk space");
  if (
    unavailableStates.test(state) ||
    /CONNECTION|TIMEOUT|ECONNREFUSED|ECONNRESET|closed/i.test(String(err?.code ?? "")) ||
    /connection|ECONNREFUSED|timeout|terminat/i.test(String(err?.message ?? ""))
  )
    return new StorageError("storage_unavailable", unavailableMessage);
  return e;
}

const unavailable = () => new StorageError("storage_unavailable", unavailableMessage);

/** Whether the database itself answered an error (it has a SQLSTATE), as opposed to a lost connection. */
const databaseAnswered = (e: unknown) => /^[0-9A-Z]{5}$/.test(String((e as { errno?: string })?.errno ?? ""));

/**
 * One caller waiting for a write. Until COMMIT is sent for it, its deadline may answer it (503
 * storage_unavailable) and the transaction then never commits; once COMMIT is sent, only the
 * commit's outcome, or the commit's own bound (503 outcome_unknown), answers it.
 */
export interface Caller<T> {
  state: "waiting" | "committing" | "answered";
  /** When its deadline passes (Date.now()). */
  deadline: number;
  resolve(v: T): void;
  reject(e: unknown): void;
  timer?: ReturnType<typeof setTimeout>;
}

export interface WriteSettings {
  /** The statement timeout, set per transaction; also each caller's deadline before COMMIT. */
  statementTimeoutMs: number;
  /** How long a sent COMMIT may take before its outcome counts as unknown. */
  commitTimeoutMs: number;
}

/** A caller whose deadline starts now, and the promise it answers. */
export function newCaller<T>(limitMs: number): { caller: Caller<T>; answer: Promise<T> } {
  let caller!: Caller<T>;
  const answer = new Promise<T>((resolve, reject) => {
    caller = { state: "waiting", deadline: Date.now() + limitMs, resolve, reject };
  });
  caller.timer = setTimeout(() => fail(caller, unavailable()), limitMs);
  return { caller, answer };
}

function fail(c: Caller<never> | Caller<unknown>, e: unknown) {
  if (c.state === "answered") return;
  c.state = "answered";
  clearTimeout(c.timer);
  c.reject(e);
}

function succeed<T>(c: Caller<T>, v: T) {
  if (c.state === "answered") return;
  c.state = "answered";
  clearTimeout(c.timer);
  c.resolve(v);
}

/** What `transact` did when it answered nobody: a caller gave up before COMMIT, or `work` failed. */
export type NotRun = { gaveUp: true } | { failed: unknown };

/** What a transaction's work gives back: a value per caller, and its last statements, sent but not awaited. */
export interface Work<T> {
  values: T[];
  /** Sent last: COMMIT goes right behind them, in the same round trip. */
  last?: Promise<unknown>[];
}

/**
 * Runs `work` in one transaction on a reserved connection for `callers` (values[i] answers
 * callers[i]). BEGIN and the settings go in one message with work's first statements behind it.
 * The deadline is checked before COMMIT: if any caller was answered meanwhile, the transaction
 * rolls back and `{ gaveUp }` is returned (the callers still waiting are not answered). If work
 * fails, it rolls back and `{ failed }` is returned, nobody answered. Otherwise COMMIT is sent,
 * behind work's last statements, and the callers are answered by the outcome: the values; if a
 * last statement failed (the database answered an error, so COMMIT rolled back), `{ failed }`
 * with the callers waiting again; the database's refusal of COMMIT; or, when the connection fails
 * or the commit's bound passes, outcome_unknown.
 */
export async function transact<T>(
  sql: SQL,
  s: WriteSettings,
  callers: Caller<T>[],
  work: (conn: ReservedSQL, begun: Promise<unknown>) => Promise<Work<T>>,
): Promise<undefined | NotRun> {
  let conn: ReservedSQL;
  try {
    conn = await sql.reserve();
  } catch (e) {
    return { failed: e };
  }
  if (callers.some((c) => c.state !== "waiting")) {
    conn.release();
    return { gaveUp: true };
  }
  let done: Work<T>;
  // Once every caller's deadline has passed with the work still unanswered, the connection is
  // given up: closed (the database rolls back), not left waiting for a database gone silent,
  // which would hold it, and the group's next transaction behind it, until TCP gives up.
  let givenUp: ReturnType<typeof setTimeout> | undefined;
  const lastDeadline = Math.max(...callers.map((c) => c.deadline));
  const silent = new Promise<"silent">((resolve) => {
    givenUp = setTimeout(() => resolve("silent"), Math.max(0, lastDeadline - Date.now()) + 50);
  });
  try {
    // One message: the statement timeout and durability hold for this transaction only, so the
    // connection carries nothing to the next client of a transaction-mode pooler.
    const begun = conn
      .unsafe(
        `BEGIN; SET LOCAL statement_timeout = ${Math.trunc(s.statementTimeoutMs)}; SET LOCAL synchronous_commit = on`,
      )
      .simple()
      .execute();
    const working = work(conn, begun);
    const first = await Promise.race([working, silent]);
    if (first === "silent") {
      working.catch(() => undefined);
      conn.close().catch(() => undefined);
      return { gaveUp: true };
    }
    done = first;
  } catch (e) {
    await end(conn, "ROLLBACK", s.statementTimeoutMs);
    return { failed: e };
  } finally {
    clearTimeout(givenUp);
  }
  const last = done.last ?? [];
  // The deadline, before COMMIT: a caller answered 503 meanwhile must find nothing committed.
  if (callers.some((c) => c.state !== "waiting")) {
    const settled = await within(Promise.allSettled(last), s.statementTimeoutMs);
    if (settled) await end(conn, "ROLLBACK", s.statementTimeoutMs);
    else conn.close().catch(() => undefined);
    return { gaveUp: true };
  }
  for (const c of callers) {
    c.state = "committing";
    clearTimeout(c.timer);
  }
  let bound: ReturnType<typeof setTimeout> | undefined;
  const commit = conn`COMMIT`.execute();
  const outcome = await Promise.race([
    Promise.allSettled([...last, commit]),
    new Promise<"unknown">((resolve) => {
      bound = setTimeout(() => resolve("unknown"), s.commitTimeoutMs);
    }),
  ]);
  clearTimeout(bound);
  const unknown = () => {
    for (const c of callers) fail(c, new StorageError("outcome_unknown", unknownMessage));
    conn.close().catch(() => undefined);
    return undefined;
  };
  if (outcome === "unknown") return unknown();
  const failed = outcome.find((o) => o.status === "rejected");
  if (failed) {
    const e = failed.reason;
    // The database answered an error: what was sent after it, COMMIT too, did nothing.
    if (!databaseAnswered(e)) return unknown();
    conn.close().catch(() => undefined);
    if (failed === outcome.at(-1)) {
      for (const c of callers) fail(c, storageError(e)); // COMMIT itself refused
      return undefined;
    }
    for (const c of callers) rearm(c);
    return { failed: e };
  }
  conn.release();
  for (const [i, c] of callers.entries()) succeed(c, done.values[i]);
  return undefined;
}

/** A caller whose transaction did nothing waits again, until what is left of its deadline. */
function rearm(c: Caller<never> | Caller<unknown>) {
  if (c.state !== "committing") return;
  c.state = "waiting";
  c.timer = setTimeout(() => fail(c, unavailable()), Math.max(0, c.deadline - Date.now()));
}

/**
 * Ends the transaction; a connection that cannot (or does not answer within `limitMs`) is
 * closed, never pooled in a transaction.
 */
async function end(conn: ReservedSQL, how: "ROLLBACK", limitMs: number) {
  try {
    const ended = conn.unsafe(how).execute();
    if (!(await within(ended, limitMs))) {
      ended.catch(() => undefined);
      throw new Error("no answer");
    }
    await ended;
    conn.release();
  } catch {
    conn.close().catch(() => undefined);
  }
}

/** Whether `p` settles (either way) within `ms`. */
async function within(p: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), ms);
  });
  try {
    return await Promise.race([
      p.then(
        () => true as const,
        () => true as const,
      ),
      late,
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * One write in a transaction of its own (erasure, import, keys): answered as `transact` answers,
 * and with the mapped error when `work` fails.
 */
export function writeAlone<T>(sql: SQL, s: WriteSettings, work: (conn: ReservedSQL) => Promise<T>): Promise<T> {
  const { caller, answer } = newCaller<T>(s.statementTimeoutMs);
  void transact(sql, s, [caller], async (conn, begun) => {
    await begun;
    return { values: [await work(conn)] };
  }).then((r) => {
    if (r && "failed" in r) fail(caller, storageError(r.failed));
  });
  return answer;
}

/** One call of apply. */
export interface ApplyCall {
  ops: readonly MemoryOp[];
  actorKeyId: string | null;
  now: number;
  idempotency?: IdempotencyRecord;
}

export type ApplyResult = (Applied | null)[] | IdempotencyKeyTaken;

const text = (sql: Conn, xs: (string | null)[]) => sql.array(xs, "text");
const sent = <T>(q: Promise<T> & { execute(): unknown }) => q.execute() as Promise<T>;

/**
 * Applies `calls` in order inside the transaction of `q`, each as if alone (a later call sees
 * what an earlier one wrote), each op with its audit event, and the answers of their
 * Idempotency-Keys. One statement per table for the whole batch, sent without waiting between
 * them: read the target rows (only when an op has a target), then take the clock rows, the event
 * seqs and the Idempotency-Keys together, then write memories, search index, events and answers
 * together. `first` are statements already sent in this transaction, awaited with the first ones.
 * The last writes are sent and returned unawaited (`last`), for COMMIT to follow them at once.
 *
 * Lock order, the same in every writer: target memory rows by id, then clock rows by namespace,
 * then idempotency rows by key. A call whose key already has an answer (committed by another
 * request, or the same key earlier in this batch) writes nothing and gets IdempotencyKeyTaken.
 */
export async function applyBatch(
  q: Conn,
  calls: readonly ApplyCall[],
  first: Promise<unknown>[] = [],
): Promise<Work<ApplyResult>> {
  // Keyed stores: their keys' lock rows first (in key order), then the current holders, read
  // after the locks so that a store committed by the lock's last owner is seen.
  const holders = new Map<string, MemoryRecord>();
  const claimedKeys = [
    ...new Set(
      calls
        .flatMap((c) => c.ops.map(keyOfOp))
        .filter((k) => k !== undefined)
        .map((k) => JSON.stringify([k.namespace, k.entity, k.key])),
    ),
  ].sort();
  if (claimedKeys.length > 0) {
    const keyRows = JSON.stringify(claimedKeys.map((k) => JSON.parse(k)));
    await Promise.all([
      Promise.all(first),
      sent(q`INSERT INTO key_locks AS l (namespace, entity, key)
        SELECT k->>0, k->>1, k->>2 FROM json_array_elements(${keyRows}::text::json) AS k
        ORDER BY (k->>0) COLLATE "C", (k->>1) COLLATE "C", (k->>2) COLLATE "C"
        ON CONFLICT (namespace, entity, key) DO UPDATE SET key = EXCLUDED.key`),
    ]);
    first = [];
    const rows = await sent(q`SELECT m.* FROM memories m, json_array_elements(${keyRows}::text::json) AS k
      WHERE m.namespace = k->>0 AND m.entity = k->>1 AND m.key = k->>2 AND m.state = 'current'
      ORDER BY m.id FOR UPDATE OF m`);
    for (const r of rows) {
      const m = memoryOf(r as Row);
      holders.set(JSON.stringify([m.namespace, m.entity, m.key]), m);
    }
  }
  const ids = [...new Set(calls.flatMap((c) => c.ops.map(targetOf)).filter((id) => id !== undefined))].sort();
  const targets = new Map<string, MemoryRecord>();
  if (ids.length > 0) {
    const [, rows] = await Promise.all([
      Promise.all(first),
      sent(q`SELECT * FROM memories WHERE id = ANY(${text(q, ids)}::uuid[]) ORDER BY id FOR UPDATE`),
    ]);
    for (const r of rows) targets.set(r.id as string, memoryOf(r as Row));
    first = [];
  }

  // Stamps to reserve per namespace: every op that may act (a target is re-checked when planned).
  // A target may be a memory created by an earlier op of the batch (as on LMDB, where each op
  // sees what the ones before it wrote): it is in no row yet, and may act in its namespace.
  const perNamespace = new Map<string, number>();
  const born = new Map<string, string>();
  for (const c of calls)
    for (const op of c.ops) {
      const id = targetOf(op);
      const target = id === undefined ? undefined : targets.get(id);
      if (id !== undefined && !targetIsLive(op, target, c.now) && !born.has(id)) continue;
      const ns = "create" in op ? op.create.namespace : (target?.namespace ?? born.get(id!)!);
      if ("create" in op) born.set(op.create.id, ns);
      perNamespace.set(ns, (perNamespace.get(ns) ?? 0) + 1);
    }
  const namespaces = [...perNamespace.keys()].sort();
  const counts = namespaces.map((ns) => perNamespace.get(ns)!);
  const stamps = counts.reduce((a, b) => a + b, 0);
  const now = calls[0].now;
  const floor = stampFloor(Math.max(...calls.map((c) => c.now)));

  // Idempotency-Keys, one row each (a repeat within the batch is taken), in key order.
  const keyed = calls
    .map((c, i) => ({ i, r: c.idempotency }))
    .filter((k): k is { i: number; r: IdempotencyRecord } => k.r !== undefined);
  const byKey = new Map<string, number>();
  for (const { i, r } of keyed) {
    const k = JSON.stringify([r.keyId, r.key]);
    if (!byKey.has(k)) byKey.set(k, i);
  }
  const claims = [...byKey.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, i]) => calls[i]);

  // One statement takes the clock rows (in name order), then the event seqs and the keys (in key
  // order): the WHERE on c makes both wait for the clocks, so seqs follow the clock's order.
  const clockRows = namespaces.map((ns, i) => ({ ns, n: counts[i] }));
  const claimRows = claims.map((c) => {
    const r = c.idempotency!;
    return { k: r.keyId, ik: r.key, h: r.hash, e: r.expiresAt };
  });
  const [, [reserved]] = await Promise.all([
    Promise.all(first),
    sent(q`
      WITH c AS (
        INSERT INTO namespace_clock AS c (namespace, last_ms)
        SELECT ns, ${floor}::bigint + n - 1
        FROM json_to_recordset(${JSON.stringify(clockRows)}::text::json) AS t(ns text, n bigint)
        ORDER BY ns COLLATE "C"
        ON CONFLICT (namespace) DO UPDATE
          SET last_ms = GREATEST(${floor}::bigint, c.last_ms + 1) + (EXCLUDED.last_ms - ${floor}::bigint)
        RETURNING namespace, last_ms),
      k AS (
        INSERT INTO idempotency AS i (key_id, idem_key, hash, state, created_at, expires_at)
        SELECT k, ik, h, 'pending', ${now}::bigint, e
        FROM json_to_recordset(${JSON.stringify(claimRows)}::text::json) AS t(k text, ik text, h text, e bigint)
        WHERE (SELECT count(*) FROM c) >= 0
        ORDER BY k COLLATE "C", ik COLLATE "C"
        ON CONFLICT (key_id, idem_key) DO UPDATE SET hash = EXCLUDED.hash, state = 'pending', status = NULL,
          body = NULL, created_at = EXCLUDED.created_at, expires_at = EXCLUDED.expires_at
        WHERE i.state = 'pending' OR i.expires_at <= EXCLUDED.created_at
        RETURNING key_id, idem_key)
      SELECT (SELECT json_agg(json_build_array(namespace, last_ms)) FROM c) AS clocks,
        (SELECT array_agg(nextval('event_seq')) FROM generate_series(1, ${stamps}::int)
          WHERE (SELECT count(*) FROM c) >= 0) AS seqs,
        (SELECT json_agg(json_build_array(key_id, idem_key)) FROM k) AS claimed`),
  ]);
  const clocks = (reserved.clocks ?? []) as [string, number | string][];
  const claimed = (reserved.claimed ?? []) as [string, string][];
  // An answer committed meanwhile: the row was there (or was being written: the insert waited for it).
  const ours = new Set<number>();
  for (const [keyId, key] of claimed) ours.add(byKey.get(JSON.stringify([keyId, key]))!);

  // A restore's guard (RevertOp.entityLastEventAtMs), read now that the namespace's clock row is
  // ours: no other writer of the namespace can commit an event until this transaction ends.
  const guards = calls.flatMap((c) =>
    c.ops.flatMap((op) => {
      const at = entityGuardOf(op);
      const t = at === undefined ? undefined : targets.get(targetOf(op)!);
      return t ? [{ namespace: t.namespace, entity: t.entity, at: at! }] : [];
    }),
  );
  for (const g of guards) {
    const [row] = await sent(
      q`SELECT COALESCE(max(at_ms), 0) AS at FROM events WHERE namespace = ${g.namespace} AND entity = ${g.entity}`,
    );
    if (Number(row.at) !== g.at)
      throw new WriteConflict("changed", `entity ${g.entity} changed while the restore was planned; try again`);
  }
  const nextMs = new Map<string, number>();
  for (const [ns, last] of clocks) nextMs.set(ns, Number(last) - perNamespace.get(ns)! + 1);
  const seqs = parseSeqs(reserved.seqs);
  let nextSeq = 0;

  const results: ApplyResult[] = [];
  const writes = new Map<string, MemoryRecord>();
  const events: EventRecord[] = [];
  // Per memory: as it was before this transaction, as it ends, and its last vector update.
  const touched = new Map<string, IndexTouch>();
  const touch = (before: MemoryRecord | undefined, after: MemoryRecord, vector: IndexTouch["vector"]) => {
    const t = touched.get(after.id);
    if (t) {
      t.after = after;
      if (t.before?.content !== after.content || vector !== undefined) t.vector = vector;
    } else touched.set(after.id, { before, after, vector });
  };
  const answers: { r: IdempotencyRecord; status: number; body: string }[] = [];
  const unanswered: IdempotencyRecord[] = [];
  calls.forEach((call, i) => {
    if (call.idempotency && !ours.has(i)) {
      results.push(new IdempotencyKeyTaken());
      return;
    }
    const applied = call.ops.map((op): Applied | null => {
      const id = targetOf(op);
      let read = id === undefined ? undefined : targets.get(id);
      // As it is after the ops before this one: changed, or created by them.
      let target = id === undefined ? undefined : (writes.get(id) ?? read);
      if (id !== undefined && !targetIsLive(op, target, call.now)) return null;
      const k = keyOfOp(op);
      if (k) {
        // The key's holder as this transaction sees it: one an earlier op wrote, else the row read.
        let holder = [...writes.values()].find(
          (r) => r.key === k.key && r.state === "current" && r.entity === k.entity && r.namespace === k.namespace,
        );
        const row = holders.get(JSON.stringify([k.namespace, k.entity, k.key]));
        if (!holder) holder = row && (writes.get(row.id) ?? row);
        if (op.event === "REVERT") checkKeyFree(op, holder);
        else if (op.event === "ADD") {
          const outcome = keyedOutcome(op, holder, call.now);
          if (outcome === "unchanged") return null;
          if (outcome === "update") {
            target = holder;
            read = targets.get(holder!.id) ?? (row?.id === holder!.id ? row : undefined);
          }
        }
      }
      const ns = "create" in op ? op.create.namespace : target!.namespace;
      const atMs = nextMs.get(ns)!;
      nextMs.set(ns, atMs + 1);
      const planned = planOp(op, target, atMs, call.actorKeyId);
      if (planned.created) {
        writes.set(planned.created.id, planned.created);
        touch(undefined, planned.created, vectorOf(op));
      }
      if (planned.target && planned.target !== target) {
        writes.set(planned.target.id, planned.target);
        touch(read, planned.target, planned.created ? undefined : vectorOf(op));
      }
      const event = planned.event as EventRecord;
      event.seq = seqs[nextSeq++];
      events.push(event);
      return { event, memory: planned.created ?? planned.target! };
    });
    results.push(applied);
    if (call.idempotency) {
      const answer = call.idempotency.answer(applied);
      if (answer) answers.push({ r: call.idempotency, ...answer });
      else unanswered.push(call.idempotency);
    }
  });

  // Deletes first (their own statements), then every new row in one statement (search.ts).
  const change = indexChange(touched.values());
  const deletes = sendIndexDeletes(q, change);
  const w = new Statement();
  w.add(
    `INSERT INTO memories (${memoryColumns}) SELECT ${memoryColumns}
     FROM json_populate_recordset(NULL::memories, $rows)
     ON CONFLICT (id) DO UPDATE SET ${memoryUpdates}`,
    [...writes.values()].map(memoryJson),
  );
  addIndexWrites(w, change);
  w.add(
    `INSERT INTO events (${eventColumns}) SELECT ${eventColumns} FROM json_populate_recordset(NULL::events, $rows)`,
    events.map(eventJson),
  );
  w.add(
    `UPDATE idempotency AS i SET state = 'done', status = t.status, body = t.body
     FROM json_to_recordset($rows) AS t(k text, ik text, status int, body text)
     WHERE i.key_id = t.k AND i.idem_key = t.ik`,
    answers.map((a) => ({ k: a.r.keyId, ik: a.r.key, status: a.status, body: a.body })),
  );
  w.add(
    `DELETE FROM idempotency AS i USING json_to_recordset($rows) AS t(k text, ik text)
     WHERE i.key_id = t.k AND i.idem_key = t.ik`,
    unanswered.map((r) => ({ k: r.keyId, ik: r.key })),
  );
  const pending = [...deletes, ...(w.empty ? [] : [w.send(q)])];
  return { values: results, last: pending };
}

/** array_agg's int8[] as numbers, ascending (it may come back as text: {1,2,3}). */
function parseSeqs(v: unknown): number[] {
  const xs = Array.isArray(v)
    ? v.map(Number)
    : typeof v === "string"
      ? v.replace(/[{}]/g, "").split(",").filter(Boolean).map(Number)
      : [];
  return xs.sort((a, b) => a - b);
}

/** The columns written, named: a column added later takes its default. */
const memoryColumns = columnList(columns.memories);
/** A memory row written again: every column but those fixed at its creation takes the new value. */
const memoryUpdates = columns.memories
  .filter((c) => !["id", "namespace", "entity", "createdAt"].includes(c.field))
  .map((c) => `${c.column} = EXCLUDED.${c.column}`)
  .join(", ");
const eventColumns = columnList(columns.events);

/** Most calls one shared transaction takes. */
const maxGroup = 128;

/** An apply waiting in its group for the next shared transaction, and who to answer. */
export interface QueuedApply {
  call: ApplyCall;
  caller: Caller<ApplyResult>;
}

/**
 * apply for PostgreSQL, with group commit: calls with the same `group` key (raw stores, of any
 * namespaces) that arrive while one of theirs is running share the next transaction: a
 * namespace's writes hold its clock row until their commit, so one transaction per call would
 * put a commit (an fsync) between every two writes of a namespace, and each would cost its own
 * statements. Grouped calls only add memories, so they lock their namespaces' clock rows (in
 * name order, in one statement) and their Idempotency-Keys after them (in key order), as every
 * writer does: grouping cannot deadlock. Each call still lands whole or not at all. If the shared
 * transaction fails for a reason other than the database's state, nothing committed, and each
 * call runs again alone, so one bad call fails only itself. A caller answered at its deadline
 * before COMMIT makes the transaction roll back; the others run again in the next one.
 *
 * Its state is `waiting`: per group, the calls not yet in a transaction, in arrival order. A
 * group is in it exactly while one `drain` of it runs (taking at most maxGroup calls per
 * transaction), so a call that finds its group there only joins the queue.
 */
export class GroupCommit {
  readonly waiting = new Map<string, QueuedApply[]>();

  constructor(
    private readonly sql: SQL,
    private readonly settings: WriteSettings,
  ) {}

  /** Applies one call: alone when `group` is undefined, else in its group's next transaction. */
  async apply(call: ApplyCall, group: string | undefined): Promise<(Applied | null)[]> {
    const { caller, answer } = newCaller<ApplyResult>(this.settings.statementTimeoutMs);
    const c = { call, caller };
    if (group === undefined) void this.alone(c);
    else {
      const calls = this.waiting.get(group);
      if (calls) calls.push(c);
      else {
        this.waiting.set(group, [c]);
        void this.drain(group);
      }
    }
    const result = await answer;
    if (result instanceof IdempotencyKeyTaken) throw result;
    return result;
  }

  /** One transaction for `batch`: see transact for what it answers and when. */
  private run(batch: QueuedApply[]) {
    return transact(
      this.sql,
      this.settings,
      batch.map((b) => b.caller),
      (conn, begun) =>
        applyBatch(
          conn,
          batch.map((b) => b.call),
          [begun],
        ),
    );
  }

  private async alone(c: QueuedApply) {
    const r = await this.run([c]);
    if (r && "failed" in r) fail(c.caller, storageError(r.failed));
  }

  /** Runs the group's waiting calls, maxGroup per transaction, until none is left. */
  private async drain(group: string) {
    for (let calls = this.waiting.get(group); calls && calls.length > 0; calls = this.waiting.get(group)) {
      const batch = calls.splice(0, maxGroup).filter((c) => c.caller.state === "waiting");
      if (batch.length === 0) continue;
      const r = await this.run(batch);
      if (!r) continue;
      const still = batch.filter((c) => c.caller.state === "waiting");
      if ("gaveUp" in r) calls.unshift(...still);
      else if (still.length === 1 || storageError(r.failed) instanceof StorageError)
        for (const c of still) fail(c.caller, storageError(r.failed));
      else await Promise.all(still.map((c) => this.alone(c)));
    }
    this.waiting.delete(group);
  }
}
