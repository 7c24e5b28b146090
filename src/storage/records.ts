// The records every storage backend keeps. Features build their public shapes from these;
// storage knows nothing of HTTP or of the features.

/** Audit event kinds: the interface's six, plus UPDATE (an edit in place, memd's extension). Persisted as these strings. */
export const eventKinds = ["ADD", "MERGE", "REPLACE", "DELETE", "SKIP_DUPLICATE", "KEEP_EXISTING", "UPDATE"] as const;
export type EventKind = (typeof eventKinds)[number];

export type MemoryState = "current" | "deleted" | "replaced";

/** What is stored per memory. Records stay after deletion, with their state, for id lookups. */
export interface MemoryRecord {
  id: string;
  namespace: string;
  entity: string;
  content: string;
  category: string;
  importance: number;
  tags?: string[];
  metadata?: Record<string, unknown>;
  source?: string;
  createdAt: number;
  updatedAt: number;
  expiresAt?: number;
  state: MemoryState;
  /**
   * When the fact was stated or observed (valid time), ms since the epoch; set by every write
   * since format 7 / schema 5. Absent on older records: it is then `createdAt` (observedOf).
   */
  observedAt?: number;
}

/** A memory's observed time: its own, or its creation time for records written before observedAt existed. */
export const observedOf = (r: MemoryRecord): number => r.observedAt ?? r.createdAt;

/** What is stored per event. `category` is kept for diff items; `atMs` is unique per namespace. */
export interface EventRecord {
  seq: number;
  namespace: string;
  entity: string;
  memoryId: string;
  event: EventKind;
  oldContent: string | null;
  newContent: string | null;
  mergedFromId: string | null;
  reason: string | null;
  category: string;
  atMs: number;
  actorKeyId: string | null;
  /**
   * The memory's state after the event (the new side: `memoryId`'s), so that the trail alone
   * replays every field (as-of reads, storage/asof.ts). Written by every event since format 7 /
   * schema 5: `importance` is set on every ADD, UPDATE, MERGE and REPLACE, and its absence
   * marks an older event, which carries only content and category. `observedAt` is on every
   * new event (for DELETE, SKIP_DUPLICATE and KEEP_EXISTING: the target's).
   */
  importance?: number;
  tags?: string[];
  metadata?: Record<string, unknown>;
  expiresAt?: number;
  observedAt?: number;
  /** The old side's observed time: the replaced memory's (REPLACE), or the one an edit changed (UPDATE, MERGE). */
  oldObservedAt?: number;
}

export const permissions = ["read", "read_write", "admin"] as const;
export type Permission = (typeof permissions)[number];

/** What is stored per API key: the SHA-256 of the secret, never the secret. */
export interface KeyRecord {
  id: string;
  name: string;
  permission: Permission;
  namespaces: string[];
  expiresAt: number | null;
  createdAt: number;
  lastUsedAt: number | null;
  revokedAt: number | null;
  hash: string;
}

/** Whether a memory is visible to reads at `now`: not deleted, replaced or past its expiry. */
export const isCurrent = (r: MemoryRecord | undefined, now: number): r is MemoryRecord =>
  r !== undefined && r.state === "current" && (r.expiresAt === undefined || r.expiresAt > now);

/**
 * The record of an erasure (POST /v1/memory/erase): who erased which entity, when, and how many
 * memory records lost their content. It holds no content, so it stays in the audit trail.
 */
export interface ErasureRecord {
  namespace: string;
  entity: string;
  atMs: number;
  actorKeyId: string | null;
  /** Memory records scrubbed (current or not). */
  memories: number;
  /** Audit events scrubbed (the erasure's own DELETE events included). */
  events: number;
}

/** One line of an export (memd export, GET /v1/export), after its header: a record and its kind. */
export type ExportRecord =
  | ({ type: "memory" } & MemoryRecord)
  | ({ type: "event" } & EventRecord)
  | ({ type: "key" } & KeyRecord)
  | ({ type: "erasure" } & ErasureRecord);

/** A stored answer for an Idempotency-Key: pending while the first request runs, then its answer. */
export interface IdempotencyEntry {
  keyId: string;
  key: string;
  /** SHA-256 of method, path and body: the same key with another request is refused. */
  hash: string;
  state: "pending" | "done";
  status?: number;
  body?: string;
  createdAt: number;
  expiresAt: number;
}
