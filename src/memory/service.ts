import { appendEvent, eventOf } from "../audit/service";
import type { Core } from "../core";
import { ApiError, invalidField } from "../http/errors";
import { isoTime } from "../http/time";
import { END, type Writes, writeDurably } from "../storage/store";
import {
  defaultCategory,
  defaultImportance,
  type Memory,
  type MemoryRecord,
  maxMetadataBytes,
  type StoreRequest,
  type StoreResponse,
} from "./model";

const iso = isoTime;

/** The public shape of a memory: fields that were never given are absent, not null. */
export function toMemory(r: MemoryRecord, event?: Memory["event"]): Memory {
  return {
    id: r.id,
    namespace: r.namespace,
    entity: r.entity,
    content: r.content,
    category: r.category,
    importance: r.importance,
    ...(r.tags ? { tags: r.tags } : {}),
    ...(r.metadata ? { metadata: r.metadata } : {}),
    ...(r.source !== undefined ? { source: r.source } : {}),
    createdAt: iso(r.createdAt),
    ...(r.updatedAt !== r.createdAt ? { updatedAt: iso(r.updatedAt) } : {}),
    ...(r.expiresAt !== undefined ? { expiresAt: iso(r.expiresAt) } : {}),
    ...(event ? { event } : {}),
  };
}

/** Limits that the schema cannot express (byte sizes, configurable bounds). Throws a 400. */
export function checkStoreLimits(core: Core, req: StoreRequest) {
  const bytes = Buffer.byteLength(req.content, "utf8");
  if (bytes > core.config.maxContentBytes)
    throw invalidField("content", `is ${bytes} bytes of UTF-8; at most ${core.config.maxContentBytes} are accepted`);
  if (req.metadata !== undefined && Buffer.byteLength(JSON.stringify(req.metadata), "utf8") > maxMetadataBytes)
    throw invalidField("metadata", `serializes to more than ${maxMetadataBytes} bytes`);
  if (req.tags?.some((tag) => tag.trim() === "")) throw invalidField("tags", "each tag needs a non-blank character");
}

export interface NewMemory {
  content: string;
  category?: string;
  importance?: number;
}

/**
 * Builds a memory record for a store request. Its times are filled in by `insertMemory`,
 * inside the write transaction, from the event clock.
 */
export function newRecord(req: StoreRequest, fact: NewMemory): MemoryRecord {
  return {
    id: Bun.randomUUIDv7(),
    namespace: req.namespace,
    entity: req.entity,
    content: fact.content,
    category: fact.category ?? req.category ?? defaultCategory,
    importance: fact.importance ?? req.importance ?? defaultImportance,
    ...(req.tags ? { tags: req.tags } : {}),
    ...(req.metadata ? { metadata: req.metadata } : {}),
    ...(req.source !== undefined ? { source: req.source } : {}),
    createdAt: 0,
    updatedAt: 0,
    ...(req.ttl !== undefined ? { expiresAt: req.ttl } : {}),
    state: "current",
  };
}

/**
 * Stages a new current memory, its indexes and its ADD (or REPLACE) event. Call from a write
 * plan. A pending `expiresAt` holds the ttl in seconds until the creation time is known.
 */
export function insertMemory(core: Core, w: Writes, r: MemoryRecord, event: ReturnType<typeof eventOf>) {
  const e = appendEvent(core.store, core.clock, w, event);
  r.createdAt = r.updatedAt = e.atMs;
  if (r.expiresAt !== undefined) r.expiresAt = e.atMs + Math.ceil(r.expiresAt * 1000);
  const { dbs } = core.store;
  w.put(dbs.memories, r.id, r);
  w.put(dbs.entityMemories, [r.namespace, r.entity, r.id], null);
  if (r.expiresAt !== undefined) w.put(dbs.expiries, [r.expiresAt, r.id], null);
  return e;
}

/** Stages taking a memory out of reads (deleted or replaced) and dropping its indexes. */
export function retireMemory(core: Core, w: Writes, r: MemoryRecord, state: "deleted" | "replaced", atMs: number) {
  const { dbs } = core.store;
  w.put(dbs.memories, r.id, { ...r, state, updatedAt: atMs });
  w.remove(dbs.entityMemories, [r.namespace, r.entity, r.id]);
  if (r.expiresAt !== undefined) w.remove(dbs.expiries, [r.expiresAt, r.id]);
}

/** Stages a change of a memory's content in place. */
export function rewriteMemory(core: Core, w: Writes, r: MemoryRecord, content: string, atMs: number): MemoryRecord {
  const next = { ...r, content, updatedAt: atMs };
  w.put(core.store.dbs.memories, r.id, next);
  return next;
}

/** `infer: false`: stores the content verbatim as one memory with an ADD event; durable on return. */
export async function storeRaw(core: Core, req: StoreRequest, actorKeyId: string | null): Promise<StoreResponse> {
  checkStoreLimits(core, req);
  const record = newRecord(req, { content: req.content });
  await writeDurably(core.store, (w) => {
    insertMemory(core, w, record, eventOf("ADD", record, actorKeyId, { newContent: record.content }));
  });
  return { memories: [toMemory(record, "ADD")], skipped: 0, conflicts: 0 };
}

const isCurrent = (r: MemoryRecord | undefined, now: number): r is MemoryRecord =>
  r !== undefined && r.state === "current" && (r.expiresAt === undefined || r.expiresAt > now);

/** A current memory by id, or undefined (unknown, deleted, replaced or expired). */
export function findMemory(core: Core, id: string, now = Date.now()): MemoryRecord | undefined {
  const r = core.store.dbs.memories.get(id) as MemoryRecord | undefined;
  return isCurrent(r, now) ? r : undefined;
}

/** Any memory record by id, current or not: used to scope event queries by memory. */
export function memoryRecord(core: Core, id: string): MemoryRecord | undefined {
  return core.store.dbs.memories.get(id) as MemoryRecord | undefined;
}

/** Current memories of a namespace (and entity), in id order, which is creation order for UUIDv7. */
export function currentMemories(
  core: Core,
  namespace: string,
  entity: string | undefined,
  limit: number,
): MemoryRecord[] {
  const prefix = entity === undefined ? [namespace] : [namespace, entity];
  const now = Date.now();
  const out: MemoryRecord[] = [];
  for (const key of core.store.dbs.entityMemories.getKeys({ start: prefix, end: [...prefix, END] })) {
    const r = core.store.dbs.memories.get((key as string[])[2]) as MemoryRecord | undefined;
    if (isCurrent(r, now)) out.push(r);
    if (out.length >= limit) break;
  }
  return out;
}

/** Deletes a current memory (event DELETE, reason "deleted"); durable on return. */
export async function deleteMemory(core: Core, id: string, actorKeyId: string | null, isAllowed: (ns: string) => void) {
  const existing = findMemory(core, id);
  if (!existing) throw new ApiError("not_found", "no memory with that id");
  isAllowed(existing.namespace);
  const removed = await writeDurably(core.store, (w) => {
    const r = findMemory(core, id);
    if (!r) return false;
    const e = appendEvent(
      core.store,
      core.clock,
      w,
      eventOf("DELETE", r, actorKeyId, { oldContent: r.content, reason: "deleted" }),
    );
    retireMemory(core, w, r, "deleted", e.atMs);
    return true;
  });
  if (!removed) throw new ApiError("not_found", "no memory with that id");
}
