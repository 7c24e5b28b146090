import type { Database } from "lmdb";

/**
 * The LMDB sub-databases and every key built in them. Names and key tuples live here, once.
 *
 * Key layout (lmdb-js tuple keys; ordered-binary compares arrays element by element, numbers
 * are big-endian so byte order is numeric order, and elements are joined by a 0x00 byte):
 *
 *   meta               name                                -> value ("format": the data dir's format version)
 *   memories           [memoryId]                          -> MemoryRecord (kept after delete, with its state)
 *   entity_memories    [namespace, entity, memoryId]       -> null  (current memories of an entity)
 *   namespace_memories [namespace, memoryId]               -> null  (current memories of a namespace; format 2;
 *                                                             format 5 held their terms here, see below)
 *   expiries           [expiresAtMs, memoryId]             -> null  (what the TTL sweeper deletes next)
 *   events             seq                                 -> EventRecord  (seq: global, strictly increasing)
 *   events_by_ns       [namespace, atMs, seq]              -> null
 *   events_by_entity   [namespace, entity, atMs, seq]      -> null; since format 7 what the event did:
 *                                                             "+id[@expiresAt]" / "-id" per memory, comma-joined
 *                                                             (storage/asof.ts stateMarks). The as-of index: an
 *                                                             entity's history up to a moment is one range scan.
 *   events_by_memory   [namespace, memoryId, atMs, seq]    -> null  (a REPLACE is listed under both memories)
 *   api_keys           [keyId]                             -> KeyRecord (hash of the secret, never the secret)
 *   api_key_hashes     [sha256 hex]                        -> keyId
 *   erasures           [namespace, entity, atMs]           -> ErasureRecord (format 4; no content)
 *   idempotency        [keyId, idempotencyKey]             -> IdempotencyEntry (format 4; pending or the answer)
 *   idempotency_expiries [expiresAtMs, keyId, idempotencyKey] -> null (format 4; what the sweeper drops next)
 *   memory_keys        [namespace, entity, key]            -> memoryId (format 8; the current memory holding a
 *                                                             keyed fact's key, written in the transaction that
 *                                                             adds, revives or retires it: one holder per key)
 *   webhooks           [webhookId]                         -> WebhookRecord (issue 34; its cursor is an event seq)
 *   webhook_deliveries [webhookId, atMs, seq, attempt]     -> DeliveryRecord (the newest 100 per webhook kept)
 *   erasure_seqs       seq                                 -> ErasureRecord (issue 34: the seq of the trail an
 *                                                             erasure took after its DELETEs, so webhooks deliver
 *                                                             it in order; no event has that seq; the clock stays above)
 *
 * Every msgpack sub-database also holds its shared structures (format 6) under the symbol key
 * Symbol.for("structures"), outside every range.
 *
 * meta also holds "searchEpoch", which a rebuild of the search index bumps (keyword snapshots,
 * keyword-snapshot.ts, of an older epoch are not used), and "clockEpoch", a counter that `memd import` bumps: a running server's event clock
 * sees it change and re-reads the last seq and event times, so imported events never collide with
 * new ones; "seqFloor", the largest seq of an import under way, which new events stay above.
 * Idempotency keys are printable ASCII (no 0x00), keyed per API key so that two keys
 * never see each other's answers.
 *
 * The search index (format 3), written in the same transaction as the memory it indexes; it
 * holds the memories with state "current" (an expired one until the sweeper deletes it; reads
 * check expiry):
 *   namespace_memories [namespace, memoryId]               -> null  (the keyword index's documents)
 *   vectors            [namespace, entity, memoryId]       -> float32 bytes, length 1 (binary encoding);
 *                                                             a scope's vectors are one range scan
 *   embed_pending      [memoryId]                          -> null  (current memories owed an embedding)
 *
 * Terms are not stored (format 6). The inverted lists (term -> memories) of a namespace are built
 * in memory on its first search, by tokenizing the records its namespace_memories entries name,
 * and kept in step after each commit (keyword-cache.ts); document counts and lengths are summed
 * there, a term's df is the live length of its list, an entity's df is counted over the entity's
 * documents there; createdAt orders equal scores without reading records. So a raw store writes
 * nothing for the index but its namespace_memories entry, and tokenizes only for namespaces
 * someone searches. (Format 3 kept terms in doc_terms keyed by entity, with df counters: 64
 * stores of 64 entities dirtied 64 more pages; format 5 kept them in namespace_memories' values:
 * tokenizing and encoding them cost 3-5 µs of a store's ~20 µs apply, bench/store-apply.ts.)
 * A namespace's vectors are likewise loaded into memory on its first semantic search
 * (vector-cache.ts).
 *
 * Namespaces and entities may not hold control characters, so no string part contains the 0x00
 * separator and two different (namespace, entity) pairs can never share a range. Memory ids are
 * UUIDv7, so id order is creation order. Event times are strictly increasing per namespace (see
 * clock.ts), so "after time T" is a plain range scan, and every index is written in the same
 * transaction as the record it points to.
 */
export const dbNames = {
  meta: "meta",
  memories: "memories",
  entityMemories: "entity_memories",
  namespaceMemories: "namespace_memories",
  expiries: "expiries",
  events: "events",
  eventsByNs: "events_by_ns",
  eventsByEntity: "events_by_entity",
  eventsByMemory: "events_by_memory",
  apiKeys: "api_keys",
  apiKeyHashes: "api_key_hashes",
  vectors: "vectors",
  embedPending: "embed_pending",
  erasures: "erasures",
  idempotency: "idempotency",
  idempotencyExpiries: "idempotency_expiries",
  memoryKeys: "memory_keys",
  webhooks: "webhooks",
  webhookDeliveries: "webhook_deliveries",
  erasureSeqs: "erasure_seqs",
} as const;

/** The open sub-databases, by their name in dbNames. */
export type Dbs = Record<keyof typeof dbNames, Database>;

/** Sub-databases whose values are raw bytes, not msgpack. */
export const binaryDbs: ReadonlySet<string> = new Set([dbNames.vectors]);

/**
 * Sorts after every string of up to 128 characters (names are at most 128), including ones that
 * start with characters above U+FFFF, whose UTF-8 sorts above "\uffff"; so `[...prefix, END]`
 * closes a prefix range.
 */
export const END = "\u{10FFFF}".repeat(130);

type Scope = { namespace: string; entity?: string; memoryId?: string };

export const keys = {
  entityMemory: (ns: string, entity: string, id: string) => [ns, entity, id],
  namespaceMemory: (ns: string, id: string) => [ns, id],
  expiry: (expiresAt: number, id: string) => [expiresAt, id],
  eventByNs: (ns: string, atMs: number, seq: number) => [ns, atMs, seq],
  eventByEntity: (ns: string, entity: string, atMs: number, seq: number) => [ns, entity, atMs, seq],
  eventByMemory: (ns: string, memoryId: string, atMs: number, seq: number) => [ns, memoryId, atMs, seq],
  vector: (ns: string, entity: string, id: string) => [ns, entity, id],
  erasure: (ns: string, entity: string, atMs: number) => [ns, entity, atMs],
  idempotency: (keyId: string, key: string) => [keyId, key],
  idempotencyExpiry: (expiresAt: number, keyId: string, key: string) => [expiresAt, keyId, key],
  memoryKey: (ns: string, entity: string, key: string) => [ns, entity, key],
  webhookDelivery: (id: string, atMs: number, seq: number, attempt: number) => [id, atMs, seq, attempt],
  /** Which event index serves a scope, and the prefix of its keys. */
  eventIndex(scope: Scope): { db: "eventsByMemory" | "eventsByEntity" | "eventsByNs"; prefix: (string | number)[] } {
    if (scope.memoryId) return { db: "eventsByMemory", prefix: [scope.namespace, scope.memoryId] };
    if (scope.entity !== undefined) return { db: "eventsByEntity", prefix: [scope.namespace, scope.entity] };
    return { db: "eventsByNs", prefix: [scope.namespace] };
  },
};

/**
 * The format this release writes. 1: the first release (no meta); 2: namespace_memories;
 * 3: the search index; 4: erasures, idempotency, idempotency_expiries; 5: the terms in
 * namespace_memories' values, no doc_terms or search_stats; 6: records' field names in each
 * sub-database's shared structures (older releases could not read those records), and no terms
 * in namespace_memories' values; 7: memories' observedAt, and events that carry the memory's
 * state after them (importance, tags, metadata, expiresAt, observedAt, oldObservedAt), for
 * as-of reads; 8: memories' key and memory_keys (keyed facts, issue 33).
 */
export const FORMAT_VERSION = 8;
