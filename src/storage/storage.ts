// The storage interface: what the features need from a database, at their level (insert a
// memory with its event, retire one, read events after a time), so that each backend can be fast
// in its own way: LMDB with synchronous reads inside one write transaction and group commit,
// PostgreSQL with one transaction per call and row locks for order across replicas.
// Feature code imports this file and records.ts, never lmdb or SQL.
import type { QueryTerm } from "../text/scoring";
import type {
  DeliveryRecord,
  ErasureRecord,
  EventKind,
  EventRecord,
  ExportRecord,
  eventState,
  IdempotencyEntry,
  KeyRecord,
  MemoryRecord,
  WebhookRecord,
} from "./records";

/** A new memory as a feature builds it; its times come from the event clock inside the transaction. */
export interface NewMemory extends Omit<MemoryRecord, "createdAt" | "updatedAt" | "expiresAt" | "state"> {
  /** Seconds from creation until the memory expires. */
  ttlSeconds?: number;
  /** Its embedding (see VectorUpdate); absent: none. */
  vector?: VectorUpdate;
}

/**
 * An embedding to store with new or changed content: the vector (any length, stored normalised),
 * or "pending" when the embedding call failed: the memory is then listed by pendingEmbeddings
 * until setVectors gives it one. A content change without one drops the old vector.
 */
export type VectorUpdate = Float32Array | number[] | "pending";

/** Fields changed in place; `null` removes tags or metadata. */
export interface MemoryPatch {
  content?: string;
  category?: string;
  importance?: number;
  tags?: string[] | null;
  metadata?: Record<string, unknown> | null;
  /** When the fact was stated or observed (ms since the epoch). */
  observedAt?: number;
  /** The embedding of the new content (see VectorUpdate). */
  vector?: VectorUpdate;
}

/**
 * One change of memory state and the audit event that records it. An op with a `target` acts on
 * an existing memory and is skipped (its result is null) unless that memory is current when the
 * transaction runs, and, when `expiresAt` is given, still expires at that time. So a change
 * decided on a snapshot can never act on a memory that was deleted or replaced meanwhile.
 */
export type MemoryOp =
  | { event: "ADD"; create: NewMemory }
  | { event: "REPLACE"; create: NewMemory; target: string; reason: string }
  | {
      event: "MERGE" | "UPDATE";
      target: string;
      patch: MemoryPatch;
      reason?: string | null;
      /** A consolidation's MERGE: the memories merged into the target (EventRecord.mergedIds). */
      mergedIds?: string[];
      /** See RevertOp.entityLastEventAtMs. */
      entityLastEventAtMs?: number;
    }
  | {
      event: "DELETE";
      target: string;
      reason: string;
      expiresAt?: number;
      /** A consolidation's DELETE: the memory this one was merged into (EventRecord.mergedInto). */
      mergedInto?: string;
      entityLastEventAtMs?: number;
    }
  | { event: "SKIP_DUPLICATE" | "KEEP_EXISTING"; target: string; newContent: string; reason?: string | null }
  | RevertOp;

/**
 * A memory's state as a revert or a restore gives it back (the fields an event carries; the id,
 * key, source and creation time stay the record's).
 */
export type RevertState = Pick<MemoryRecord, "content" | "category" | "importance"> &
  Partial<Pick<MemoryRecord, (typeof eventState)[number]>> & { observedAt: number };

/**
 * Sets a memory to a state it had (`to`), or retires it (`to` null), with an ordinary event
 * carrying `revertOf` (storage/ops.ts planOp: ADD when it comes back, UPDATE when it changes,
 * DELETE when it goes). It acts only on the memory exactly as it was planned from (`expect`), and
 * when `entityLastEventAtMs` is given, only while the entity's newest event is still that one:
 * otherwise the whole apply fails with WriteConflict, so a restore is one atomic change of the
 * state it read, never a mix.
 */
export interface RevertOp {
  event: "REVERT";
  target: string;
  to: RevertState | null;
  revertOf: string;
  reason: string;
  expect: { updatedAt: number; state: MemoryRecord["state"] };
  /** A keyed memory brought back claims its key again: the key's current holder must be none (or it). */
  key?: { namespace: string; entity: string; key: string };
  entityLastEventAtMs?: number;
  vector?: VectorUpdate;
}

/**
 * An apply refused as a whole, nothing written: a memory a revert or restore planned from changed
 * meanwhile ("changed": plan again), the key of a memory it brings back is held by another current
 * memory ("key_taken"), or its content was erased ("erased").
 */
export class WriteConflict extends Error {
  constructor(
    readonly reason: "changed" | "key_taken" | "erased",
    message: string,
  ) {
    super(message);
  }
}

/** What an op did: its event, and the memory it created or acted on, as it is after the op. */
export interface Applied {
  event: EventRecord;
  memory: MemoryRecord;
}

export interface EventScope {
  namespace: string;
  entity?: string;
  /** Events of this memory, including a REPLACE that superseded it. */
  memoryId?: string;
}

export interface MemoryScope {
  namespace: string;
  entity?: string;
}

/** A namespace that holds data, for browsing: its current memories and its newest event. */
export interface NamespaceSummary {
  namespace: string;
  /** Current memory records (one past its TTL counts until the sweeper retires it). */
  memories: number;
  lastEventAtMs: number;
}

/** An entity that has events in a namespace, for browsing. */
export interface EntitySummary {
  entity: string;
  /** Current memory records, as in NamespaceSummary. */
  memories: number;
  lastEventAtMs: number;
}

/** A bounded page of names in the backend's name order, strictly after `after`. */
export interface NamePage {
  /** Only names starting with this. */
  prefix?: string;
  after?: string;
  limit: number;
}

/** Conditions a search result must meet besides its score. */
export interface SearchFilter {
  category?: string;
  /** Any one of these categories (and `category`, when given, as well). */
  categories?: string[];
  /** Every one of these tags. */
  tags?: string[];
  /** Observed at or after this time (ms; see MemoryRecord.observedAt). */
  observedAfter?: number;
  /** Observed strictly before this time (ms). */
  observedBefore?: number;
  /** The memory holding this key (keyed facts). */
  key?: string;
  /** Only entities whose name starts with this text. */
  entityPrefix?: string;
}

/** A current memory and its score, higher is better. */
export interface Scored {
  memory: MemoryRecord;
  score: number;
}

/** Where a memory's vector is kept: [namespace, entity, id]. */
export type VectorKey = [namespace: string, entity: string, id: string];

/** A memory whose embedding is owed: its content as of `updatedAt`. */
export interface PendingEmbedding {
  id: string;
  content: string;
  updatedAt: number;
}

/** A page of current memories, newest first (GET /v1/memory). */
export interface ListMemoriesQuery {
  namespace: string;
  entity?: string;
  category?: string;
  /** Every one of these tags must be on the memory. */
  tags?: string[];
  /** Observed at or after this time (ms). */
  observedAfter?: number;
  /** Observed strictly before this time (ms). */
  observedBefore?: number;
  /** Only the memory holding this key (keyed facts; needs entity). */
  key?: string;
  /** Only entities whose name starts with this text. */
  entityPrefix?: string;
  limit: number;
  /** Continue with memories older than this memory id (the last one of the previous page). */
  before?: string;
}

export interface MemoryPage {
  memories: MemoryRecord[];
  /**
   * The id to continue `before`, or undefined at the end. A page may hold fewer than `limit`
   * memories and still have a next one: a filtered scan stops after a bounded number of records.
   */
  next?: string;
}

/** A page of an entity as of a moment (Storage.entityAsOf). */
export interface AsOfQuery {
  namespace: string;
  /**
   * Absent: the whole namespace, newest first, read memory by memory through the
   * (namespace, memory, time) event index; a page then reads a bounded number of index entries and
   * may be short with a next page, as a filtered list is.
   */
  entity?: string;
  /** The moment, ms since the epoch. */
  asOf: number;
  /** What each version must meet (as a search filter or a list query's filters). */
  filter?: SearchFilter;
  /** Continue with memories older than this memory id. */
  before?: string;
  /** At most this many; absent: all. */
  limit?: number;
}

/** How an import treats a record whose id already exists. */
export interface ImportOptions {
  /** Leave existing records as they are and go on. */
  skipExisting: boolean;
  /** Also skip existing records that are identical to the line (resuming an interrupted import). */
  skipIdentical: boolean;
  /**
   * The largest event seq of the whole import: new events (of a running server too) take seqs
   * above it from now on, so they never collide with events still to be imported.
   */
  seqFloor?: number;
  /**
   * Events take the next free seqs, in batch order, instead of their own (which may be held by
   * other events); their times and contents are kept. They are not checked for existence.
   */
  renumberEvents?: boolean;
}

/**
 * An Idempotency-Key's answer, written by `apply` in the same transaction as the change it
 * answers for: a change and its kept answer commit together or not at all, so a retry after any
 * failure either finds the answer or finds nothing done.
 */
export interface IdempotencyRecord {
  keyId: string;
  key: string;
  /** SHA-256 of method, path and body: the same key with another request is refused. */
  hash: string;
  /** When the kept answer may be dropped. */
  expiresAt: number;
  /**
   * The answer for what the ops did, computed inside the transaction; undefined keeps nothing
   * (the request answers with an error, e.g. 404 for a target no longer current).
   */
  answer(applied: readonly (Applied | null)[]): { status: number; body: string } | undefined;
}

/**
 * `apply`'s refusal when an answer for the same Idempotency-Key was kept first (by a request
 * running at the same time, on any replica): nothing of this call was written.
 */
export class IdempotencyKeyTaken extends Error {
  constructor() {
    super("an answer for this Idempotency-Key was kept first");
  }
}

/** Figures for /metrics, read at scrape time. */
export interface StorageStats {
  currentMemories: number;
  memoryRecords: number;
  events: number;
  /** Current memories waiting for their embedding (see VectorUpdate). */
  pendingEmbeddings: number;
  /** Backend-specific gauges: name -> [help, value]. */
  gauges: Record<string, [string, number]>;
  /** Backend-specific counters (only grow while the process runs): name -> [help, value]. */
  counters?: Record<string, [string, number]>;
}

// The roles: one small interface per concern, each implemented once per backend in a file of its
// name (lmdb/events.ts beside postgres/events.ts, ...). A feature asks for the roles it uses.

/** Changes of memories, each with its audit event, and the order and durability around them. */
export interface MemoryWrites {
  /**
   * Applies `ops` in order, in one transaction, each with its audit event (times strictly
   * increasing per namespace); resolves once the transaction is durable. Either every op that is
   * not skipped lands, or none does. With `idempotency`, its answer is kept in that same
   * transaction (also when `ops` is empty); if an unexpired answer for the key exists, nothing
   * is written and the call rejects with IdempotencyKeyTaken.
   */
  apply(
    ops: readonly MemoryOp[],
    actorKeyId: string | null,
    now?: number,
    idempotency?: IdempotencyRecord,
  ): Promise<(Applied | null)[]>;
  /**
   * Runs `fn` after every earlier call for the same (namespace, entity) has settled, across every
   * process that shares this storage: smart stores of one entity never overlap.
   */
  serialize<T>(namespace: string, entity: string, fn: () => Promise<T>): Promise<T>;
  /** Resolves once everything that reads can see is durable (LMDB flushes after commit; PostgreSQL commits durably). */
  durable(): Promise<void>;
}

/** Memories as they are now. */
export interface MemoryReads {
  /** Any memory record by id, current or not. */
  getMemory(id: string): Promise<MemoryRecord | undefined>;
  /** Current memories of a namespace or entity, in id order (creation order), at most `limit`. */
  currentMemories(scope: MemoryScope, limit: number): Promise<MemoryRecord[]>;
  /**
   * Current memories matching `q`, newest first (reverse id order: ids are UUIDv7). Paging with
   * `before` never loses or repeats a memory while others are added or removed.
   */
  listMemories(q: ListMemoriesQuery): Promise<MemoryPage>;
  /**
   * For each of `memories`, the current memories just before and just after it in its entity's
   * id order (creation order: the memories stored next to it in time), as [its id, neighbour] pairs.
   */
  adjacentMemories(memories: readonly MemoryRecord[], now: number): Promise<[string, MemoryRecord][]>;
  /** The current memory holding a keyed fact's key (issue 33), or undefined. */
  memoryByKey(namespace: string, entity: string, key: string, now?: number): Promise<MemoryRecord | undefined>;
  /** Current memories whose expiry is at or before `now`, soonest first. */
  dueExpiries(now: number, limit: number): Promise<{ id: string; expiresAt: number }[]>;
}

/** The audit trail, by time. */
export interface EventReads {
  /** Events of a scope, newest first; cost follows `limit`, not the history. */
  newestEvents(scope: EventScope, limit: number): Promise<EventRecord[]>;
  /** Up to `limit` events of a scope strictly after `afterMs`, oldest first. */
  eventsAfter(scope: EventScope, afterMs: number, limit: number): Promise<EventRecord[]>;
}

/** Memories as they were at a moment, replayed from the audit trail (storage/asof.ts). */
export interface AsOfReads {
  /**
   * A page of an entity's (or a namespace's) memories as they were current at `asOf` (ms),
   * replayed from its events (storage/asof.ts), newest first (reverse id order), filtered like a
   * list. For an entity, cost follows its events up to `asOf` (read through the (namespace,
   * entity, time) event index) and the page, not the store.
   */
  entityAsOf(q: AsOfQuery): Promise<MemoryPage>;
  /** Memory `id` as it was current at `asOf`, or undefined (see entityAsOf). */
  memoryAsOf(id: string, asOf: number): Promise<MemoryRecord | undefined>;
  /**
   * Optional first phase of an as-of keyword search (search/asof.ts): the id and content of each
   * memory entityAsOf would answer for the whole entity (no filter, no page), without making
   * versions of them, and `versions` to make those of the ids asked for (same order; undefined
   * for one not current then). A backend without it answers searches from entityAsOf.
   */
  entityTextsAsOf?(q: { namespace: string; entity: string; asOf: number }): Promise<AsOfTexts>;
}

/** The texts of an entity's memories as of a moment, and their versions on demand (AsOfReads.entityTextsAsOf). */
export interface AsOfTexts {
  texts: { id: string; content: string }[];
  versions(ids: string[]): Promise<(MemoryRecord | undefined)[]> | (MemoryRecord | undefined)[];
}

/** What holds data: namespaces and entities, for browsing. */
export interface Browse {
  /**
   * Namespaces that have events, in name order; cost follows `limit` (a skip scan over the
   * namespace's event index), not the number of memories or events.
   */
  namespaces(page: NamePage): Promise<NamespaceSummary[]>;
  /** Entities of a namespace that have events, in name order; bounded like `namespaces`. */
  entities(namespace: string, page: NamePage): Promise<EntitySummary[]>;
}

/** Ranked reads over current memories, by words and by meaning. */
export interface Search {
  /**
   * The `limit` best current memories of a scope for `terms` (text/tokens.ts queryTerms) by BM25
   * over the scope's current memories (text/scoring.ts: k1, b, the terms' weights; document
   * frequencies and lengths of the scope: the entity when given, else the namespace), best first,
   * ties newer first. The index behind it is written in the same transaction as every change
   * made by apply, so it is never stale. With `share` (text/scoring.ts NEIGHBOUR_SHARE, which
   * search passes), in an entity's search each hit's score gains that share of the better score
   * of the hits stored just before and after it (index/keyword/search.ts); PostgreSQL's SQL
   * statement, which answers until the replica's lists are built, ranks by BM25 alone.
   */
  keywordSearch(
    scope: MemoryScope,
    terms: readonly QueryTerm[],
    filter: SearchFilter,
    limit: number,
    now?: number,
    share?: number,
  ): Promise<Scored[]>;
  /**
   * The `limit` current memories of a scope whose stored vectors are closest to `vector` by cosine
   * similarity, exactly (every vector of the scope is scored), best first, ties newer first.
   */
  semanticSearch(
    scope: MemoryScope,
    vector: Float32Array,
    filter: SearchFilter,
    limit: number,
    now?: number,
  ): Promise<Scored[]>;
}

/** The vectors behind semantic search: the queue of memories owed one, and rebuilding the index. */
export interface Embeddings {
  /** Up to `limit` current memories waiting for an embedding, oldest first. */
  pendingEmbeddings(limit: number): Promise<PendingEmbedding[]>;
  /**
   * Stores vectors for pending memories, each only if the memory is still current and unchanged
   * since `updatedAt` (else its content has a newer vector or a newer pending entry). Returns how
   * many were stored.
   */
  setVectors(items: readonly { id: string; updatedAt: number; vector: Float32Array | number[] }[]): Promise<number>;
  /**
   * LMDB only: another thread of this process may embed pending memories and store their
   * vectors itself, on its own handle of the same environment (opened from `dataDir`), so that
   * the thread serving requests does not write them (embedding/embed-thread.ts). `begin` is
   * called before such a batch: it counts as a write in flight until the function it returns is
   * called with the vector keys the batch wrote, which the in-memory vectors then follow.
   */
  vectorsElsewhere?: {
    dataDir: string;
    mapSizeMb?: number;
    begin(): (touched: readonly VectorKey[]) => void;
  };
  /**
   * Rebuilds the keyword index from the current memories (for upgrades and repairs); with
   * `embeddings`, also drops every vector and marks every current memory pending. Returns the
   * number of current memories indexed.
   */
  rebuildSearchIndex(options?: { embeddings?: boolean }): Promise<number>;
}

/** API keys. */
export interface KeyStore {
  /**
   * Stores a key. With `onlyIfNone`, only when the store holds no key at all, decided inside the
   * transaction, so replicas starting together on an empty database make one first key, not one
   * each. Returns whether it was stored.
   */
  insertKey(key: KeyRecord, options?: { onlyIfNone?: boolean }): Promise<boolean>;
  getKey(id: string): Promise<KeyRecord | undefined>;
  keyByHash(hash: string): Promise<KeyRecord | undefined>;
  /** Every key, revoked ones included. */
  listKeys(): Promise<KeyRecord[]>;
  /** Marks a key revoked; false when it is unknown or already revoked. */
  revokeKey(id: string, at: number): Promise<boolean>;
  /** Records a use of the key; not durable on return (a lost update only makes lastUsedAt older). */
  touchKey(id: string, at: number): Promise<void>;
}

/** Erasing an entity, and the record of erasures. */
export interface Erasure {
  /**
   * Erases an entity, in one transaction: every current memory gets a DELETE event (reason
   * `erased`, no content); every memory record of the entity, current or not, loses its content,
   * tags, metadata and source; every event of those memories keeps its id, kind, memory, time and
   * actor but loses its contents, and its reason becomes `erased`; stored idempotent answers that
   * name those memories are dropped. Records and returns the erasure itself.
   */
  erase(namespace: string, entity: string, actorKeyId: string | null, now?: number): Promise<ErasureRecord>;
  /** Erasures of a namespace (or one entity), oldest first. */
  erasures(namespace: string, entity?: string): Promise<ErasureRecord[]>;
}

/** Export and import of whole stores, records as they are. */
export interface Transfer {
  /**
   * Every record of the given namespaces (all when undefined): memories in every state, events,
   * erasures, and API keys when `keys` is set, read from one consistent snapshot while writers
   * go on. Streams: memory use does not grow with the store.
   */
  exportAll(options: { namespaces?: string[]; keys: boolean }): AsyncIterable<ExportRecord>;
  /** For each record, whether one with its id (a key id, an event seq) exists, and whether it is identical. */
  existing(records: readonly ExportRecord[]): Promise<("absent" | "identical" | "different")[]>;
  /**
   * Writes a batch of exported records as they are (ids and times kept) in one transaction, and
   * moves the event clock and sequence past them. Throws without writing if an id exists and
   * `options` does not allow skipping it. Returns how many were written and skipped.
   */
  importRecords(
    records: readonly ExportRecord[],
    options: ImportOptions,
  ): Promise<{ written: number; skipped: number }>;
  /**
   * After an import: makes the first search of each namespace as fast as after a restart (LMDB:
   * builds and saves its keyword snapshot; backends that build nothing ahead leave it out).
   * Returns how many namespaces were prepared.
   */
  prepareSearch?(namespaces: readonly string[]): Promise<number>;
}

/** Answers kept for Idempotency-Keys (written by MemoryWrites.apply). */
export interface Idempotency {
  /** The kept answer for (keyId, key) that has not expired at `now`, if any (see IdempotencyRecord). */
  idempotentAnswer(keyId: string, key: string, now: number): Promise<IdempotencyEntry | undefined>;
  /** Drops entries that expired at or before `now`; returns how many. */
  sweepIdempotency(now: number, limit: number): Promise<number>;
}

/** The store itself: readiness, figures, closing. */
export interface Upkeep {
  /** Why the storage cannot take writes now, or undefined when it can. */
  notReadyReason(): Promise<string | undefined>;
  stats(): Promise<StorageStats>;
  close(): Promise<void>;
}

/** Which events of the trail a webhook wants: namespace patterns (as keys have them) and kinds. */
export interface TrailFilter {
  /** Namespace patterns: `*`, an exact name, or `prefix/*`. */
  namespaces: readonly string[];
  /** Event kinds; empty: every kind. */
  kinds: readonly EventKind[];
}

/** An erasure at its place in the trail (the seq it took; erasures imported or made before it had one are not there). */
export type TrailErasure = ErasureRecord & { seq: number };

/** A cursor to move (Webhooks.advanceWebhooks). */
export interface WebhookMove {
  id: string;
  rev: number;
  cursor: number;
  deliveries: readonly DeliveryRecord[];
}

/** `w` after `m` (undefined: unchanged, it was edited since m was planned). PostgreSQL's statement does the same. */
export function advanced(w: WebhookRecord, m: WebhookMove): WebhookRecord | undefined {
  if (w.rev !== m.rev) return undefined;
  const last = m.deliveries[m.deliveries.length - 1];
  const cursor = Math.max(w.cursor, m.cursor);
  return last ? { ...w, cursor, failingSince: null, lastDeliveredAt: last.atMs, lastError: null } : { ...w, cursor };
}

/**
 * Webhook subscriptions, their delivery log, and the audit trail in seq order for them.
 * Changes are read-modify-write functions run inside one transaction, so that the deliverer's
 * cursor moves and the API's edits never overwrite each other.
 */
export interface Webhooks {
  insertWebhook(w: WebhookRecord): Promise<void>;
  getWebhook(id: string): Promise<WebhookRecord | undefined>;
  /** Every subscription (they are few: made by hand). */
  listWebhooks(): Promise<WebhookRecord[]>;
  /**
   * Changes a subscription in one transaction: `change` gets the stored record and answers the
   * new one (or undefined: no change). With `owner`, only while that owner holds its delivery
   * lease (else answers undefined and changes nothing); with `deliveries`, those attempts are
   * logged in the same transaction (the newest 100 per subscription are kept). Answers the stored record
   * after the call, undefined when there is none (or the lease is lost).
   */
  updateWebhook(
    id: string,
    change: (w: WebhookRecord) => WebhookRecord | undefined,
    options?: { owner?: string; deliveries?: readonly DeliveryRecord[] },
  ): Promise<WebhookRecord | undefined>;
  /**
   * Moves the cursors of subscriptions whose lease `owner` holds, all at once (one statement on
   * PostgreSQL, one transaction on LMDB): each to at least `cursor` if its rev is still `rev`;
   * with `deliveries` (successes, oldest first), those are logged, and the subscription is no
   * longer failing and was last delivered at the last one's time. Answers each stored record
   * after the call, undefined for those with none (or whose lease is lost).
   */
  advanceWebhooks(owner: string, moves: readonly WebhookMove[]): Promise<(WebhookRecord | undefined)[]>;
  /** Removes a subscription, its log and its lease; false when there was none. */
  deleteWebhook(id: string): Promise<boolean>;
  /** The newest attempts of a subscription, newest first. */
  webhookDeliveries(id: string, limit: number): Promise<DeliveryRecord[]>;
  /**
   * Up to `limit` events matching `filter` with seq above `afterSeq`, in seq order, that no later
   * commit can precede: on LMDB every committed event (seq is commit order); on PostgreSQL those
   * up to the horizon below which every transaction that took a seq has ended (seqs are taken in
   * the order of each namespace's clock, not across namespaces). With them, the erasures of the
   * filter's namespaces (whatever its kinds) whose seq is in the same range: an erasure takes a
   * seq of the trail after its DELETEs, no event has it. `scannedTo` is the seq the scan is past
   * (matching or not): a cursor may move there.
   */
  trailAfter(
    afterSeq: number,
    filter: TrailFilter,
    limit: number,
  ): Promise<{ events: EventRecord[]; erasures: TrailErasure[]; scannedTo: number }>;
  /** Events by seq, as they are now (an erasure scrubs events in place): one answer per seq, in order, undefined where none. */
  eventsBySeq(seqs: number[]): Promise<(EventRecord | undefined)[]>;
  /**
   * How many erasures have committed, by any process: it goes up in each erasure's own
   * transaction, whatever seq the erasure took, so events read after one answer and before the
   * next that gives the same count are as they are now. One row on PostgreSQL.
   */
  erasuresCommitted(): Promise<number>;
  /**
   * Takes or renews the delivery lease of a subscription for `ttlMs` (database time on
   * PostgreSQL, so replicas' clocks do not matter): true while `owner` holds it. A lease is a
   * row, not a session lock, so it works through a pooler in transaction mode. LMDB has one
   * process per data dir: always true.
   */
  leaseWebhook(id: string, owner: string, ttlMs: number): Promise<boolean>;
  /**
   * Renews, for `ttlMs`, the leases `owner` still holds among `ids` (an expired one too, while no
   * other owner has taken it; never one given up): one statement for every subscription a replica
   * delivers. Answers the ids renewed. LMDB: every id.
   */
  renewWebhookLeases(ids: readonly string[], owner: string, ttlMs: number): Promise<Set<string>>;
  /** Gives a lease up (on a clean stop), so another replica takes over at once. */
  releaseWebhook(id: string, owner: string): Promise<void>;
}

/** Every role, over one backend. */
export interface Storage
  extends MemoryWrites,
    MemoryReads,
    EventReads,
    AsOfReads,
    Browse,
    Search,
    Embeddings,
    KeyStore,
    Erasure,
    Transfer,
    Idempotency,
    Webhooks,
    Upkeep {
  readonly backend: "lmdb" | "postgres";
  /**
   * Other processes write to this store too (replicas on one PostgreSQL): what this process read
   * may be changed by another's write, an erasure included, with no word to this process. False
   * where one process owns the store (LMDB's data dir).
   */
  readonly sharedWithReplicas: boolean;
}

/** Conditions of the database itself, mapped by the HTTP layer to their own error codes. */
export class StorageError extends Error {
  constructor(
    readonly code: "storage_full" | "storage_unavailable" | "outcome_unknown",
    message: string,
  ) {
    super(message);
  }
}

export type { EventKind };
