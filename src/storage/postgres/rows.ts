// PostgreSQL rows and memd's records, both ways: one function per table and direction.
import type { ErasureRecord, EventRecord, KeyRecord, MemoryRecord } from "../records";

export type Row = Record<string, unknown>;
/** `json` columns come back as their text. */
export const json = <T>(v: unknown): T => (typeof v === "string" ? JSON.parse(v) : v) as T;
const num = (v: unknown) => (v === null || v === undefined ? undefined : Number(v));

export function memoryOf(r: Row): MemoryRecord {
  return {
    id: r.id as string,
    namespace: r.namespace as string,
    entity: r.entity as string,
    content: r.content as string,
    category: r.category as string,
    importance: Number(r.importance),
    ...(r.tags !== null ? { tags: json<string[]>(r.tags) } : {}),
    ...(r.metadata !== null ? { metadata: json<Record<string, unknown>>(r.metadata) } : {}),
    ...(r.source !== null ? { source: r.source as string } : {}),
    createdAt: Number(r.created_at),
    updatedAt: Number(r.updated_at),
    ...(r.expires_at !== null ? { expiresAt: Number(r.expires_at) } : {}),
    state: r.state as MemoryRecord["state"],
    ...(r.observed_at !== null && r.observed_at !== undefined ? { observedAt: Number(r.observed_at) } : {}),
  };
}

export const memoryRow = (m: MemoryRecord) => ({
  id: m.id,
  namespace: m.namespace,
  entity: m.entity,
  content: m.content,
  category: m.category,
  importance: m.importance,
  tags: m.tags === undefined ? null : JSON.stringify(m.tags),
  metadata: m.metadata === undefined ? null : JSON.stringify(m.metadata),
  source: m.source ?? null,
  created_at: m.createdAt,
  updated_at: m.updatedAt,
  expires_at: m.expiresAt ?? null,
  state: m.state,
  observed_at: m.observedAt ?? null,
});

export function eventOf(r: Row): EventRecord {
  const e: EventRecord = {
    seq: Number(r.seq),
    namespace: r.namespace as string,
    entity: r.entity as string,
    memoryId: r.memory_id as string,
    event: r.event as EventRecord["event"],
    oldContent: r.old_content as string | null,
    newContent: r.new_content as string | null,
    mergedFromId: r.merged_from_id as string | null,
    reason: r.reason as string | null,
    category: r.category as string,
    atMs: Number(r.at_ms),
    actorKeyId: r.actor_key_id as string | null,
  };
  // The memory's state after the event (records.ts), on events written since schema 5.
  if (r.importance !== null && r.importance !== undefined) e.importance = Number(r.importance);
  if (r.tags !== null && r.tags !== undefined) e.tags = json<string[]>(r.tags);
  if (r.metadata !== null && r.metadata !== undefined) e.metadata = json<Record<string, unknown>>(r.metadata);
  if (r.expires_at !== null && r.expires_at !== undefined) e.expiresAt = Number(r.expires_at);
  if (r.observed_at !== null && r.observed_at !== undefined) e.observedAt = Number(r.observed_at);
  if (r.old_observed_at !== null && r.old_observed_at !== undefined) e.oldObservedAt = Number(r.old_observed_at);
  return e;
}

export const keyRow = (k: KeyRecord) => ({
  id: k.id,
  hash: k.hash,
  name: k.name,
  permission: k.permission,
  namespaces: JSON.stringify(k.namespaces),
  expires_at: k.expiresAt,
  created_at: k.createdAt,
  last_used_at: k.lastUsedAt,
  revoked_at: k.revokedAt,
});

export const eventRow = (e: Omit<EventRecord, "seq">) => ({
  namespace: e.namespace,
  entity: e.entity,
  memory_id: e.memoryId,
  event: e.event,
  old_content: e.oldContent,
  new_content: e.newContent,
  merged_from_id: e.mergedFromId,
  reason: e.reason,
  category: e.category,
  at_ms: e.atMs,
  actor_key_id: e.actorKeyId,
  importance: e.importance ?? null,
  tags: e.tags === undefined ? null : JSON.stringify(e.tags),
  metadata: e.metadata === undefined ? null : JSON.stringify(e.metadata),
  expires_at: e.expiresAt ?? null,
  observed_at: e.observedAt ?? null,
  old_observed_at: e.oldObservedAt ?? null,
});

export function keyOf(r: Row): KeyRecord {
  return {
    id: r.id as string,
    name: r.name as string,
    permission: r.permission as KeyRecord["permission"],
    namespaces: json<string[]>(r.namespaces),
    expiresAt: num(r.expires_at) ?? null,
    createdAt: Number(r.created_at),
    lastUsedAt: num(r.last_used_at) ?? null,
    revokedAt: num(r.revoked_at) ?? null,
    hash: r.hash as string,
  };
}

export const erasureOf = (r: Row): ErasureRecord => ({
  namespace: r.namespace as string,
  entity: r.entity as string,
  atMs: Number(r.at_ms),
  actorKeyId: r.actor_key_id as string | null,
  memories: Number(r.memories),
  events: Number(r.events),
});

export const erasureRow = (e: ErasureRecord) => ({
  namespace: e.namespace,
  entity: e.entity,
  at_ms: e.atMs,
  actor_key_id: e.actorKeyId,
  memories: e.memories,
  events: e.events,
});
