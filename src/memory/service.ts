import type { Core } from "../core";
import { type EmbedCost, newCost, withVectors } from "../embedding/client";
import type { IdempotencySlot } from "../http/idempotency";
import { matchesFilter } from "../storage/ops";
import { type ErasureRecord, isCurrent, memoryExtras, observedOf } from "../storage/records";
import type { Applied, ListMemoriesQuery, MemoryOp, MemoryPage, NewMemory } from "../storage/storage";
import { ApiError, invalidField } from "../wire/errors";
import { isUuid } from "../wire/schemas";
import { isoTime, observedAtField, parseIsoTime } from "../wire/time";
import {
  defaultCategory,
  defaultImportance,
  type Erasure,
  type ListResponse,
  type Memory,
  type MemoryRecord,
  maxMetadataBytes,
  type PatchRequest,
  type StoreRequest,
  type StoreResponse,
} from "./model";

const iso = isoTime;

/** The public shape of a memory: fields that were never given are absent, not null. */
export function toMemory(r: MemoryRecord, event?: Memory["event"]): Memory {
  // Assigned one by one, in this order (the JSON's), rather than spread: on every answer.
  const m = {
    id: r.id,
    namespace: r.namespace,
    entity: r.entity,
    content: r.content,
    category: r.category,
    importance: r.importance,
  } as Memory;
  // Tags, metadata, source, key and any field added to the record since (records.ts: memoryExtras).
  for (const f of memoryExtras) {
    const v = r[f];
    if (v !== undefined && v !== null) (m as Record<string, unknown>)[f] = v;
  }
  m.createdAt = iso(r.createdAt);
  if (r.updatedAt !== r.createdAt) m.updatedAt = iso(r.updatedAt);
  if (r.expiresAt !== undefined) m.expiresAt = iso(r.expiresAt);
  m.observedAt = iso(observedOf(r));
  if (event) m.event = event;
  return m;
}

/** Limits that the schema cannot express (byte sizes, configurable bounds). Throws a 400. */
export function checkStoreLimits(core: Core, req: StoreRequest) {
  // At most 3 UTF-8 bytes per UTF-16 unit: most contents need no count.
  const bytes = req.content.length * 3 <= core.config.maxContentBytes ? 0 : Buffer.byteLength(req.content, "utf8");
  if (bytes > core.config.maxContentBytes)
    throw invalidField("content", `is ${bytes} bytes of UTF-8; at most ${core.config.maxContentBytes} are accepted`);
  if (req.metadata !== undefined && Buffer.byteLength(JSON.stringify(req.metadata), "utf8") > maxMetadataBytes)
    throw invalidField("metadata", `serializes to more than ${maxMetadataBytes} bytes`);
  observedAtField(req.observedAt);
}

export interface Fact {
  content: string;
  category?: string;
  importance?: number;
}

/** A new memory for a store request and one of its facts; times are set when it is written. */
export function newMemory(req: StoreRequest, fact: Fact): NewMemory {
  const m: NewMemory = {
    id: Bun.randomUUIDv7(),
    namespace: req.namespace,
    entity: req.entity,
    content: fact.content,
    category: fact.category ?? req.category ?? defaultCategory,
    importance: fact.importance ?? req.importance ?? defaultImportance,
  };
  if (req.tags) m.tags = req.tags;
  if (req.metadata) m.metadata = req.metadata;
  if (req.source !== undefined) m.source = req.source;
  if (req.ttl !== undefined) m.ttlSeconds = req.ttl;
  // Checked by checkStoreLimits; absent: the store time.
  if (req.observedAt !== undefined) m.observedAt = parseIsoTime(req.observedAt);
  if (req.key !== undefined) m.key = req.key;
  return m;
}

/**
 * `infer: false`: stores the content verbatim as one memory with an ADD event; durable on return.
 * With `idempotency`, the answer is kept in the same transaction (see http/idempotency.ts).
 */
export async function storeRaw(
  core: Core,
  req: StoreRequest,
  actorKeyId: string | null,
  cost: EmbedCost = newCost(),
  idempotency?: IdempotencySlot,
): Promise<StoreResponse> {
  checkStoreLimits(core, req);
  const ops = await withVectors(core, [{ event: "ADD", create: newMemory(req, { content: req.content }) }], cost);
  if (req.key !== undefined)
    return storeKeyed(core, req as StoreRequest & { key: string }, ops, actorKeyId, idempotency);
  const answerOf = ([added]: readonly (Applied | null)[]): StoreResponse => ({
    memories: [toMemory(added!.memory, "ADD")],
    skipped: 0,
    conflicts: 0,
  });
  return answerOf(await core.storage.apply(ops, actorKeyId, undefined, idempotency?.record(answerOf)));
}

/**
 * A keyed store (storage/ops.ts keyedOutcome decides, inside the transaction): a new memory
 * (ADD), the memory holding the key changed in place (UPDATE, same id), or nothing written when
 * it already holds exactly this (`unchanged: 1`; the answer shows it as it is).
 */
async function storeKeyed(
  core: Core,
  req: StoreRequest & { key: string },
  ops: MemoryOp[],
  actorKeyId: string | null,
  idempotency?: IdempotencySlot,
): Promise<StoreResponse> {
  const answerOf = ([done]: readonly (Applied | null)[]): StoreResponse | undefined =>
    done
      ? {
          memories: [toMemory(done.memory, done.event.event === "ADD" ? "ADD" : "UPDATE")],
          skipped: 0,
          conflicts: 0,
          unchanged: 0,
        }
      : undefined;
  // Nothing written: the holder is read after the transaction. Should it be gone meanwhile (a
  // delete between the two), the store runs again and adds.
  for (let attempt = 0; ; attempt++) {
    const answer = answerOf(await core.storage.apply(ops, actorKeyId, undefined, idempotency?.record(answerOf)));
    if (answer) return answer;
    const holder = await core.storage.memoryByKey(req.namespace, req.entity, req.key);
    if (holder || attempt >= 2) {
      if (!holder) throw new ApiError("conflict", "the memory holding this key kept changing; retry");
      return { memories: [toMemory(holder)], skipped: 1, conflicts: 0, unchanged: 1 };
    }
  }
}

/** A current memory by id, or undefined (unknown, deleted, replaced or expired). */
export async function findMemory(core: Core, id: string, now = Date.now()): Promise<MemoryRecord | undefined> {
  return currentOf(await core.storage.getMemory(id), now);
}

/** The record if it is current at `now` (not deleted, replaced or expired), else undefined. */
export const currentOf = (r: MemoryRecord | undefined, now = Date.now()): MemoryRecord | undefined =>
  isCurrent(r, now) ? r : undefined;

/**
 * Deletes a current memory (event DELETE, reason "deleted"); durable on return. `found` is the
 * memory as the key may see it (keys/auth.ts visibleMemory: undefined for an unknown id or one of
 * another namespace); 404 unless it is current.
 */
export async function deleteMemory(
  core: Core,
  id: string,
  actorKeyId: string | null,
  found: MemoryRecord | undefined,
  idempotency?: IdempotencySlot,
): Promise<{ deleted: true }> {
  if (!currentOf(found)) throw new ApiError("not_found", "no memory with that id");
  const answerOf = ([done]: readonly (Applied | null)[]) => (done ? { deleted: true as const } : undefined);
  const op: MemoryOp = { event: "DELETE", target: id, reason: "deleted" };
  const answer = answerOf(await core.storage.apply([op], actorKeyId, undefined, idempotency?.record(answerOf)));
  if (!answer) throw new ApiError("not_found", "no memory with that id");
  return answer;
}

/** Reads of a cursor made for one query: its filters, hashed, so a cursor of another query is refused. */
function queryHash(q: ListMemoriesQuery & { asOf?: number }): string {
  const parts: unknown[] = [q.namespace, q.entity ?? null, q.category ?? null, [...(q.tags ?? [])].sort()];
  if (q.key !== undefined) parts.push({ key: q.key });
  if (q.entityPrefix !== undefined) parts.push({ entityPrefix: q.entityPrefix });
  // Only when given, so that cursors made before these filters existed stay valid.
  if (q.asOf !== undefined || q.observedAfter !== undefined || q.observedBefore !== undefined)
    parts.push(q.asOf ?? null, q.observedAfter ?? null, q.observedBefore ?? null);
  const key = JSON.stringify(parts);
  return new Bun.CryptoHasher("sha256").update(key).digest("hex").slice(0, 16);
}

const badCursor = () => invalidField("cursor", "is malformed or was made for another query; start again without it");

/** The opaque cursor: the last id shown and the query it belongs to. */
export const encodeCursor = (q: ListMemoriesQuery & { asOf?: number }, lastId: string) =>
  Buffer.from(JSON.stringify({ b: lastId, q: queryHash(q) })).toString("base64url");

function decodeCursor(q: ListMemoriesQuery & { asOf?: number }, raw: string): string {
  let v: { b?: unknown; q?: unknown };
  try {
    v = JSON.parse(Buffer.from(raw, "base64url").toString("utf8"));
  } catch {
    throw badCursor();
  }
  if (typeof v?.b !== "string" || !isUuid(v.b) || v.q !== queryHash(q)) throw badCursor();
  return v.b;
}

/**
 * A page of current memories, newest first. The cursor names the last memory shown, and ids
 * only grow (UUIDv7), so paging never repeats a memory nor loses one that stays current.
 */
export async function listMemories(
  core: Core,
  query: Omit<ListMemoriesQuery, "before"> & { asOf?: number },
  cursor: string | undefined,
): Promise<ListResponse> {
  const q: ListMemoriesQuery = { ...query, ...(cursor !== undefined ? { before: decodeCursor(query, cursor) } : {}) };
  if (query.key !== undefined && query.entity === undefined)
    throw invalidField("entity", "is required with key: a key names one memory of an entity");
  const page =
    query.asOf !== undefined
      ? await listAsOf(core, q, query.asOf)
      : query.key !== undefined
        ? await byKey(core, q, query.key)
        : await core.storage.listMemories(q);
  return {
    memories: page.memories.map((r) => toMemory(r)),
    nextCursor: page.next === undefined ? null : encodeCursor(query, page.next),
  };
}

/** The page of the memory holding a key: it alone, when it meets the other filters (and comes after the cursor). */
async function byKey(core: Core, q: ListMemoriesQuery, key: string): Promise<MemoryPage> {
  const r = await core.storage.memoryByKey(q.namespace, q.entity!, key);
  const shown = r && matchesFilter(r, q) && (q.before === undefined || r.id < q.before);
  return { memories: shown ? [r] : [] };
}

/** Refuses an as-of read without an entity: it replays one entity's history (docs/time.md). */
export function requireEntityForAsOf(entity: string | undefined, what: string) {
  if (entity === undefined)
    throw invalidField(
      "entity",
      `is required with asOf: ${what} as of a moment replays one entity's history; give the entity (docs/time.md)`,
    );
}

/** A page of an entity's memories as they were current at `asOf`, newest first, as listMemories pages. */
async function listAsOf(core: Core, q: ListMemoriesQuery, asOf: number) {
  const { namespace, entity, before, limit } = q;
  return core.storage.entityAsOf({ namespace, entity, asOf, filter: q, before, limit });
}

/** Memory `id` as it was current at `asOf`, or undefined (see Storage.memoryAsOf). */
export const findMemoryAsOf = (core: Core, id: string, asOf: number) => core.storage.memoryAsOf(id, asOf);

/**
 * Changes a current memory in place (event UPDATE, reason "edited"); 400 when the body changes
 * nothing, 404 when the memory is not current. `found` is the memory as the key may see it
 * (keys/auth.ts visibleMemory: undefined for an unknown id or one of another namespace).
 */
export async function patchMemory(
  core: Core,
  id: string,
  patch: PatchRequest,
  actorKeyId: string,
  found: MemoryRecord | undefined,
  idempotency?: IdempotencySlot,
): Promise<Memory> {
  if (Object.keys(patch).length === 0)
    throw new ApiError(
      "invalid_request",
      "the body changes nothing: send content, category, importance, tags, metadata or observedAt",
    );
  const observedAt = observedAtField(patch.observedAt);
  if (patch.content !== undefined) {
    const bytes = Buffer.byteLength(patch.content, "utf8");
    if (bytes > core.config.maxContentBytes)
      throw invalidField("content", `is ${bytes} bytes of UTF-8; at most ${core.config.maxContentBytes} are accepted`);
  }
  if (patch.metadata && Buffer.byteLength(JSON.stringify(patch.metadata), "utf8") > maxMetadataBytes)
    throw invalidField("metadata", `serializes to more than ${maxMetadataBytes} bytes`);
  const existing = currentOf(found);
  if (!existing) throw new ApiError("not_found", "no memory with that id");
  const same = (a: unknown, b: unknown) => Bun.deepEquals(a ?? null, b ?? null, true);
  const changes =
    (patch.content !== undefined && patch.content !== existing.content) ||
    (patch.category !== undefined && patch.category !== existing.category) ||
    (patch.importance !== undefined && patch.importance !== existing.importance) ||
    (patch.tags !== undefined && !same(patch.tags, existing.tags)) ||
    (patch.metadata !== undefined && !same(patch.metadata, existing.metadata)) ||
    (observedAt !== undefined && observedAt !== observedOf(existing));
  if (!changes) throw new ApiError("invalid_request", "the body changes nothing: every field already has that value");
  const { observedAt: _text, ...fields } = patch;
  const op: MemoryOp = {
    event: "UPDATE",
    target: id,
    patch: observedAt === undefined ? fields : { ...fields, observedAt },
    reason: "edited",
  };
  // New content gets its vector before the write, like a store (or is left pending for the worker).
  const contentChanges = patch.content !== undefined && patch.content !== existing.content;
  const ops = contentChanges ? await withVectors(core, [op], newCost()) : [op];
  const answerOf = ([done]: readonly (Applied | null)[]) => (done ? toMemory(done.memory) : undefined);
  const answer = answerOf(await core.storage.apply(ops, actorKeyId, undefined, idempotency?.record(answerOf)));
  if (!answer) throw new ApiError("not_found", "no memory with that id");
  return answer;
}

/** Deletes every current memory of an entity in one transaction, one DELETE event each (reason "deleted"). */
export async function deleteEntity(
  core: Core,
  namespace: string,
  entity: string,
  actorKeyId: string,
  idempotency?: IdempotencySlot,
) {
  const ops: MemoryOp[] = [];
  for (let page = await core.storage.listMemories({ namespace, entity, limit: 1000 }); ; ) {
    for (const m of page.memories) ops.push({ event: "DELETE", target: m.id, reason: "deleted" });
    if (page.next === undefined) break;
    page = await core.storage.listMemories({ namespace, entity, limit: 1000, before: page.next });
  }
  const answerOf = (done: readonly (Applied | null)[]) => ({ deleted: done.filter(Boolean).length });
  if (ops.length === 0 && !idempotency) return { deleted: 0 };
  return answerOf(await core.storage.apply(ops, actorKeyId, undefined, idempotency?.record(answerOf)));
}

/** The public shape of an erasure record. */
export const toErasure = (e: ErasureRecord): Erasure => ({
  namespace: e.namespace,
  entity: e.entity,
  erasedAt: iso(e.atMs),
  actorKeyId: e.actorKeyId,
  memories: e.memories,
  events: e.events,
});

/** Erases an entity (see Storage.erase); 404 when it never had a memory. */
export async function eraseEntity(core: Core, namespace: string, entity: string, actorKeyId: string): Promise<Erasure> {
  const [any] = await core.storage.newestEvents({ namespace, entity }, 1);
  if (!any) throw new ApiError("not_found", "no memory of that entity, current or past");
  return toErasure(await core.storage.erase(namespace, entity, actorKeyId));
}
