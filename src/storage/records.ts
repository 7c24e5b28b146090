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
}

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
