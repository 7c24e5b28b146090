import type { Core } from "../core";
import { type EmbedCost, newCost, withVectors } from "../embedding/client";
import { ApiError, invalidField } from "../http/errors";
import { isoTime } from "../http/time";
import { isCurrent } from "../storage/records";
import type { NewMemory } from "../storage/storage";
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

export interface Fact {
  content: string;
  category?: string;
  importance?: number;
}

/** A new memory for a store request and one of its facts; times are set when it is written. */
export function newMemory(req: StoreRequest, fact: Fact): NewMemory {
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
    ...(req.ttl !== undefined ? { ttlSeconds: req.ttl } : {}),
  };
}

/** `infer: false`: stores the content verbatim as one memory with an ADD event; durable on return. */
export async function storeRaw(
  core: Core,
  req: StoreRequest,
  actorKeyId: string | null,
  cost: EmbedCost = newCost(),
): Promise<StoreResponse> {
  checkStoreLimits(core, req);
  const ops = await withVectors(core, [{ event: "ADD", create: newMemory(req, { content: req.content }) }], cost);
  const [added] = await core.storage.apply(ops, actorKeyId);
  return { memories: [toMemory(added!.memory, "ADD")], skipped: 0, conflicts: 0 };
}

/** A current memory by id, or undefined (unknown, deleted, replaced or expired). */
export async function findMemory(core: Core, id: string, now = Date.now()): Promise<MemoryRecord | undefined> {
  const r = await core.storage.getMemory(id);
  return isCurrent(r, now) ? r : undefined;
}

/** Deletes a current memory (event DELETE, reason "deleted"); durable on return. */
export async function deleteMemory(core: Core, id: string, actorKeyId: string | null, isAllowed: (ns: string) => void) {
  const existing = await findMemory(core, id);
  if (!existing) throw new ApiError("not_found", "no memory with that id");
  isAllowed(existing.namespace);
  const [done] = await core.storage.apply([{ event: "DELETE", target: id, reason: "deleted" }], actorKeyId);
  if (!done) throw new ApiError("not_found", "no memory with that id");
}
