// Revert and restore (issue 33): a memory, or an entity, goes back to a state the audit trail
// holds, with ordinary events (ADD, UPDATE, DELETE) carrying `revertOf`; history is never
// rewritten. The plan is made from reads; the write (storage/ops.ts planOp, RevertOp) acts only on
// the state it was planned from, else the whole write is refused and planned again.
import { readAsOf, toAuditEvent } from "../audit/service";
import { limits } from "../config/limits";
import type { Core } from "../core";
import { newCost, withVectors } from "../embedding/client";
import type { IdempotencySlot } from "../http/idempotency";
import { toMemory } from "../memory/service";
import { candidates, changesState, foldEvent, type Latest, versionAt } from "../storage/asof";
import { type EventRecord, isCurrent, type MemoryRecord, observedOf } from "../storage/records";
import { type Applied, type RevertOp, type RevertState, WriteConflict } from "../storage/storage";
import { ApiError, invalidField } from "../wire/errors";
import { isoTime } from "../wire/time";
import type { RestoredMemory, RestoreRequest, RestoreResponse, RevertRequest, RevertResponse } from "./model";

/**
 * How often a revert or restore is planned again when what it read changed before its write,
 * waiting a little longer each time (random, up to 25 ms times the attempt): writers of the entity
 * that keep coming make it answer 409 conflict rather than wait without end.
 */
const ATTEMPTS = 12;
const backOff = (attempt: number) => Bun.sleep(Math.random() * 25 * attempt);

/** Every event of a memory, oldest first (its history is read whole: a memory's, not a store's). */
async function memoryEvents(core: Core, m: MemoryRecord): Promise<EventRecord[]> {
  const out: EventRecord[] = [];
  for (let after = -1; ; ) {
    const page = await core.storage.eventsAfter({ namespace: m.namespace, memoryId: m.id }, after, 1000);
    out.push(...page);
    if (page.length < 1000) return out;
    after = page.at(-1)!.atMs;
  }
}

/** Whether an event sets the state of memory `id` (its own, or the old side of a REPLACE). */
const setsStateOf = (e: EventRecord, id: string) =>
  changesState(e) && (e.memoryId === id || (e.event === "REPLACE" && e.mergedFromId === id));

/** The fields in which two versions differ ("state" when one is not current). */
export function changedFields(a: MemoryRecord | undefined, b: MemoryRecord | undefined): string[] {
  if (!a || !b) return a || b ? ["state"] : [];
  const same = (x: unknown, y: unknown) => Bun.deepEquals(x ?? null, y ?? null, true);
  const out: string[] = [];
  if (a.content !== b.content) out.push("content");
  if (a.category !== b.category) out.push("category");
  if (a.importance !== b.importance) out.push("importance");
  if (!same(a.tags, b.tags)) out.push("tags");
  if (!same(a.metadata, b.metadata)) out.push("metadata");
  if (a.expiresAt !== b.expiresAt) out.push("expiresAt");
  if (observedOf(a) !== observedOf(b)) out.push("observedAt");
  return out;
}

const stateOf = (v: MemoryRecord): RevertState => {
  const s: RevertState = {
    content: v.content,
    category: v.category,
    importance: v.importance,
    observedAt: observedOf(v),
  };
  if (v.tags !== undefined) s.tags = v.tags;
  if (v.metadata !== undefined) s.metadata = v.metadata;
  if (v.expiresAt !== undefined) s.expiresAt = v.expiresAt;
  return s;
};

/** What going from `record` (as stored) to `want` (undefined: not current) takes. */
interface Step {
  record: MemoryRecord;
  now: MemoryRecord | undefined;
  want: MemoryRecord | undefined;
  action: RevertResponse["action"];
  fields: string[];
}

function stepOf(record: MemoryRecord, want: MemoryRecord | undefined, at: number): Step {
  const now = isCurrent(record, at) ? record : undefined;
  const fields = changedFields(now, want);
  const action =
    fields.length === 0 ? "unchanged" : want === undefined ? "delete" : record.state === "current" ? "update" : "add";
  // A memory past its expiry but not yet swept that should be gone: the sweeper's DELETE does it.
  return { record, now, want, action: want === undefined && !now ? "unchanged" : action, fields };
}

function opOf(s: Step, revertOf: string, reason: string): RevertOp {
  const r = s.record;
  const op: RevertOp = {
    event: "REVERT",
    target: r.id,
    to: s.want ? stateOf(s.want) : null,
    revertOf,
    reason,
    expect: { updatedAt: r.updatedAt, state: r.state },
  };
  if (r.key !== undefined) op.key = { namespace: r.namespace, entity: r.entity, key: r.key };
  return op;
}

/** The API error for a refused write that planning again cannot fix. */
function refusal(e: WriteConflict): ApiError {
  if (e.reason === "erased") return new ApiError("erased", e.message);
  if (e.reason === "key_taken") return new ApiError("conflict", e.message);
  return new ApiError("conflict", "the memories kept changing while this was planned; try again");
}

const erasedError = (id: string) =>
  new ApiError(
    "erased",
    `memory ${id} was erased: its content is gone from the store and the audit trail, and cannot come back`,
  );

/** The revert of one memory to its state right after one of its events (RevertRequest). */
export async function revertMemory(
  core: Core,
  id: string,
  req: RevertRequest,
  actorKeyId: string,
  found: MemoryRecord | undefined,
  idempotency?: IdempotencySlot,
): Promise<RevertResponse> {
  if (!found) throw new ApiError("not_found", "no memory with that id");
  if (!/^[1-9][0-9]{0,15}$/.test(req.toEvent))
    throw invalidField("toEvent", "must be an event id (digits), as GET /v1/memory/events shows it");
  const seq = Number(req.toEvent);
  for (let attempt = 1; ; attempt++) {
    const record = attempt === 1 ? found : (await core.storage.getMemory(id))!;
    const events = await memoryEvents(core, record);
    const target = events.find((e) => e.seq === seq);
    if (!target) throw new ApiError("not_found", `event ${req.toEvent} is not an event of memory ${id}`);
    // An erasure took the content from the record and from every event of the memory.
    if (record.content === "" || target.reason === "erased") throw erasedError(id);
    const last = events.filter((e) => e.seq <= seq && setsStateOf(e, id)).at(-1);
    if (!last) throw new ApiError("not_found", `event ${req.toEvent} is not an event of memory ${id}`);
    const step = stepOf(record, versionAt(id, last, record, -1), Date.now());
    const answer = (done: Applied | null): RevertResponse => ({
      memoryId: id,
      toEvent: req.toEvent,
      dryRun: req.dryRun === true,
      action: step.action,
      fields: step.fields,
      before: step.now ? toMemory(step.now) : null,
      after: done
        ? done.memory.state === "current"
          ? toMemory(done.memory)
          : null
        : step.want
          ? toMemory(step.action === "unchanged" ? step.now! : step.want)
          : null,
      event: done ? toAuditEvent(done.event) : null,
    });
    if (req.dryRun || step.action === "unchanged") return answer(null);
    const ops = await withVectors(core, [opOf(step, req.toEvent, "reverted")], newCost());
    const answerOf = ([done]: readonly (Applied | null)[]) => (done ? answer(done) : undefined);
    try {
      const [done] = await core.storage.apply(ops, actorKeyId, undefined, idempotency?.record(answerOf));
      return answer(done);
    } catch (e) {
      if (!(e instanceof WriteConflict)) throw e;
      if (e.reason !== "changed" || attempt >= ATTEMPTS) throw refusal(e);
      await backOff(attempt);
    }
  }
}

/** Every current memory of an entity, as stored (a page at a time). */
async function currentOfEntity(core: Core, namespace: string, entity: string): Promise<MemoryRecord[]> {
  const out: MemoryRecord[] = [];
  for (let page = await core.storage.listMemories({ namespace, entity, limit: 1000 }); ; ) {
    out.push(...page.memories);
    if (page.next === undefined) return out;
    page = await core.storage.listMemories({ namespace, entity, limit: 1000, before: page.next });
  }
}

/**
 * The memories of an entity current at `asOf` that an erasure since has emptied: they are left
 * out of the as-of answer and cannot come back. Read only when the entity was erased after asOf.
 */
async function erasedSince(core: Core, namespace: string, entity: string, asOf: number): Promise<string[]> {
  const erasures = await core.storage.erasures(namespace, entity);
  if (!erasures.some((x) => x.atMs > asOf)) return [];
  const latest = new Map<string, Latest>();
  for (let after = -1; ; ) {
    const page = await core.storage.eventsAfter({ namespace, entity }, after, 1000);
    for (const e of page) if (e.atMs <= asOf) foldEvent(latest, e);
    if (page.length < 1000 || page.at(-1)!.atMs > asOf) break;
    after = page.at(-1)!.atMs;
  }
  const out: string[] = [];
  for (const id of candidates(latest, asOf)) if ((await core.storage.getMemory(id))?.content === "") out.push(id);
  return out;
}

/** The restore of an entity to a moment (RestoreRequest), in one write. */
export async function restoreEntity(
  core: Core,
  req: RestoreRequest,
  actorKeyId: string,
  idempotency?: IdempotencySlot,
): Promise<RestoreResponse> {
  const { namespace, entity } = req;
  const asOf = (await readAsOf(core.storage, namespace, req.asOf))!;
  const revertOf = isoTime(asOf);
  for (let attempt = 1; ; attempt++) {
    // The entity's newest event first: any change after it makes the write refuse this plan.
    const [newest] = await core.storage.newestEvents({ namespace, entity }, 1);
    const then = new Map((await core.storage.entityAsOf({ namespace, entity, asOf })).memories.map((m) => [m.id, m]));
    const current = new Map((await currentOfEntity(core, namespace, entity)).map((m) => [m.id, m]));
    const at = Date.now();
    const steps: Step[] = [];
    for (const id of new Set([...then.keys(), ...current.keys()])) {
      const record = current.get(id) ?? (await core.storage.getMemory(id));
      if (record) steps.push(stepOf(record, then.get(id), at));
    }
    const erased = await erasedSince(core, namespace, entity, asOf);
    const moving = steps.filter((s) => s.action !== "unchanged");
    if (moving.length > limits.restoreMemories)
      throw new ApiError(
        "invalid_request",
        `this restore would change ${moving.length} memories; at most ${limits.restoreMemories} are changed in one write`,
      );
    // Deletes first, so that a keyed memory brought back finds its key free.
    const order = { delete: 0, update: 1, add: 2, unchanged: 3 };
    moving.sort((a, b) => order[a.action] - order[b.action]);
    const answer = (applied: readonly (Applied | null)[]): RestoreResponse => {
      const after = new Map<string, MemoryRecord>();
      for (const a of applied) if (a) after.set(a.memory.id, a.memory);
      const items: RestoredMemory[] = steps.map((s) => {
        const done = after.get(s.record.id);
        const result = done ? (done.state === "current" ? done : undefined) : s.action === "unchanged" ? s.now : s.want;
        return {
          id: s.record.id,
          action: s.action,
          fields: s.fields,
          before: s.now ? toMemory(s.now) : null,
          after: result ? toMemory(result) : null,
        };
      });
      for (const id of erased) items.push({ id, action: "erased", fields: [], before: null, after: null });
      items.sort((a, b) => (a.id < b.id ? 1 : a.id > b.id ? -1 : 0));
      return {
        namespace,
        entity,
        asOf: revertOf,
        dryRun: req.dryRun === true,
        changed: moving.length,
        memories: items,
        events: applied.filter((a): a is Applied => a !== null).map((a) => toAuditEvent(a.event)),
      };
    };
    if (req.dryRun || moving.length === 0) return answer([]);
    const ops = moving.map((s) => opOf(s, revertOf, "restored"));
    ops[0].entityLastEventAtMs = newest?.atMs ?? 0;
    const answerOf = (applied: readonly (Applied | null)[]) => answer(applied);
    try {
      const embedded = await withVectors(core, ops, newCost());
      return answer(await core.storage.apply(embedded, actorKeyId, undefined, idempotency?.record(answerOf)));
    } catch (e) {
      if (!(e instanceof WriteConflict)) throw e;
      if (e.reason !== "changed" || attempt >= ATTEMPTS) throw refusal(e);
      await backOff(attempt);
    }
  }
}
