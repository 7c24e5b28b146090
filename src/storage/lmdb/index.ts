// The LMDB backend: one embedded environment in the data dir. Reads are synchronous; every
// write is one transaction batched with concurrent ones into a shared commit (group commit), and
// resolves only after that commit is flushed to disk.
import { closeSync, openSync, readSync } from "node:fs";
import { join } from "node:path";
import { type Database, type Key, open, type RootDatabase } from "lmdb";
import { stateMarks } from "../asof";
import { keyedMutex } from "../mutex";
import { type Planned, planOp, targetIsLive, targetOf, vectorOf } from "../ops";
import { type EventRecord, type IdempotencyEntry, isCurrent, type KeyRecord, type MemoryRecord } from "../records";
import {
  type Applied,
  type EntitySummary,
  IdempotencyKeyTaken,
  type IdempotencyRecord,
  type MemoryOp,
  type NamespaceSummary,
  type Storage,
  StorageError,
} from "../storage";
import { lmdbAsOf } from "./asof";
import { EventClock } from "./clock";
import { keywordCache as newKeywordCache } from "./keyword-cache";
import { binaryDbs, dbNames, END, FORMAT_VERSION, keys } from "./layout";
import { lmdbLifecycle } from "./lifecycle";
import { migrate, rebuildIndex } from "./migrate";
import { IndexWriter, indexChange, keywordSearch, semanticSearch } from "./search";
import { vectorCache as newVectorCache } from "./vector-cache";

export type Dbs = Record<keyof typeof dbNames, Database>;

/** An apply waiting for its batch's write transaction. */
interface Pending {
  ops: readonly MemoryOp[];
  actorKeyId: string | null;
  now: number;
  idempotency?: IdempotencyRecord;
  resolve(applied: (Applied | null)[]): void;
  reject(e: unknown): void;
}

export interface LmdbOptions {
  mapSizeMb?: number;
  /** false: the in-memory keyword lists do not follow applies (only for bench/search.ts's index-off baseline). */
  searchIndex?: boolean;
}

export interface LmdbStorage extends Storage {
  readonly backend: "lmdb";
  readonly env: RootDatabase;
  readonly dbs: Dbs;
  /** Runs a write plan durably (see writeDurably); for backend-level tools such as bulk loads. */
  write<T>(plan: (w: Writes) => T): Promise<T>;
}

/**
 * Where each msgpack sub-database keeps the field names of its records (lmdb-js shared
 * structures, format 6): a value then holds only its field values. Without it every event and
 * memory carried its own field names (an event took 233 bytes, now 127), and msgpackr defined
 * its record shape anew on every write. A symbol key lies outside every range read.
 */
const sharedStructuresKey = Symbol.for("structures");

/**
 * The field names of the records kept in msgpack sub-databases (storage/records.ts). Only record
 * shapes made of these are shared; any other object, such as metadata (whose keys are anyone's
 * words), defines its shape inside its own value, so that erasing the value erases its keys and
 * `memd compact` leaves none behind.
 */
const recordFields = new Set(
  [
    ["id", "namespace", "entity", "content", "category", "importance", "tags", "metadata", "source"],
    ["createdAt", "updatedAt", "expiresAt", "state", "observedAt", "oldObservedAt"],
    ["seq", "memoryId", "event", "oldContent", "newContent", "mergedFromId", "reason", "atMs", "actorKeyId"],
    ["name", "permission", "namespaces", "lastUsedAt", "revokedAt", "hash"],
    ["memories", "events", "keyId", "key", "status", "body"],
  ].flat(),
);
/** lmdb-js passes shouldShareStructure on to msgpackr; its DatabaseOptions type leaves it out. */
const msgpackOptions = {
  sharedStructuresKey,
  shouldShareStructure: (keys: string[]) => keys.every((k) => recordFields.has(k)),
};

/** Opens the LMDB environment of a data dir (no creation, no migration): for tools such as backup. */
export function openEnv(dataDir: string, options: LmdbOptions = {}): { env: RootDatabase; dbs: Dbs } {
  checkHeader(join(dataDir, "data.mdb"));
  const env = open({
    path: dataDir,
    mapSize: (options.mapSizeMb ?? 65536) * 1024 * 1024,
    maxDbs: 32,
    // lmdb-js guesses "a file, not a directory" from a dot in the name (e.g. memd-data.v2): never.
    noSubdir: false,
    // Commits share one fsync batch (group commit); 2xx answers wait for env.flushed.
    overlappingSync: true,
  });
  const dbs = Object.fromEntries(
    Object.entries(dbNames).map(([k, name]) => [
      k,
      env.openDB(name, binaryDbs.has(name) ? { encoding: "binary" } : msgpackOptions),
    ]),
  ) as Dbs;
  return { env, dbs };
}

/**
 * Refuses a data.mdb that does not start with LMDB's meta page (its magic number within the first
 * page header): the native library would crash the process on it instead of failing.
 */
function checkHeader(file: string) {
  let head: Buffer;
  try {
    const fd = openSync(file, "r");
    try {
      head = Buffer.alloc(64);
      head = head.subarray(0, readSync(fd, head, 0, 64, 0));
    } finally {
      closeSync(fd);
    }
  } catch {
    return; // no store yet (LMDB creates it), or one LMDB reports on itself
  }
  if (head.length === 0) return;
  const magic = Buffer.from([0xde, 0xc0, 0xef, 0xbe]); // MDB_MAGIC 0xBEEFC0DE, little-endian
  if (!head.includes(magic)) throw new Error(`${file} is not an LMDB store (damaged, or not written by memd)`);
}

/**
 * Opens (creating if needed) the store in `dataDir` and migrates it to this release's format.
 * A data dir written by a newer release is refused, never opened for writing.
 */
export async function openLmdb(dataDir: string, options: LmdbOptions = {}): Promise<LmdbStorage> {
  const { env, dbs } = openEnv(dataDir, options);
  try {
    await migrate(env, dbs, dataDir);
  } catch (e) {
    await env.close();
    throw e;
  }
  const clock = new EventClock(dbs);
  const flushed = () => Promise.resolve(env.flushed).then(() => undefined);
  const vectorCache = newVectorCache(dbs);
  /**
   * Writes begun and not yet followed by the in-memory lists, each with the last seq handed out
   * when it began: every event up to the smallest is committed and followed (keyword snapshots
   * are taken as of that seq, keyword-snapshot.ts).
   */
  const inflight = new Map<object, number>();
  const settledSeq = () => {
    let min = clock.handedOut;
    for (const seq of inflight.values()) if (seq < min) min = seq;
    return min;
  };
  const keywordCache = newKeywordCache(dbs, options.searchIndex === false ? undefined : dataDir, settledSeq);
  /**
   * Runs a write plan durably. The in-memory keyword lists and vectors follow what it committed:
   * every IndexWriter the plan made is collected (IndexWriter.collect), and the memories and
   * vectors it touched are re-read from LMDB afterwards (harmless if nothing was committed).
   */
  const write = async <T>(plan: (w: Writes) => T): Promise<T> => {
    const writers: IndexWriter[] = [];
    const token = {};
    inflight.set(token, clock.handedOut);
    try {
      return await writeDurably(env, flushed, (w) => IndexWriter.collect(writers, () => plan(w)));
    } finally {
      for (const ix of writers) {
        vectorCache.refresh(ix.vectorsTouched);
        keywordCache.refresh(ix.keywordTouched);
      }
      inflight.delete(token);
    }
  };
  const serialize = keyedMutex();
  const indexOn = options.searchIndex !== false;

  /** Stages the writes of one planned op and returns what it did. */
  function stage(
    w: Writes,
    ix: IndexWriter,
    op: MemoryOp,
    p: Planned,
    seq: number,
    overlay: Map<string, MemoryRecord>,
  ): Applied {
    // The planned event is this plan's own: its seq is added in place.
    const event = p.event as EventRecord;
    event.seq = seq;
    putEvent(w, dbs, event);
    if (p.created) {
      const r = p.created;
      w.put(dbs.memories, r.id, r);
      w.put(dbs.entityMemories, keys.entityMemory(r.namespace, r.entity, r.id), null);
      if (r.expiresAt !== undefined) w.put(dbs.expiries, keys.expiry(r.expiresAt, r.id), null);
      overlay.set(r.id, r);
      // namespace_memories, the keyword index and the vectors (search.ts).
      indexChange(ix, undefined, r, vectorOf(op));
    }
    if (p.target && p.target !== overlay.get(p.target.id)) {
      const r = p.target;
      const before = overlay.get(r.id);
      w.put(dbs.memories, r.id, r);
      overlay.set(r.id, r);
      if (r.state !== "current") {
        w.remove(dbs.entityMemories, keys.entityMemory(r.namespace, r.entity, r.id));
        if (before?.expiresAt !== undefined) w.remove(dbs.expiries, keys.expiry(before.expiresAt, r.id));
      }
      // namespace_memories, the keyword index and vectors follow the memory in this same transaction.
      indexChange(ix, before, r, p.created ? undefined : vectorOf(op));
    }
    return { event, memory: p.created ?? p.target! };
  }

  const getRecord = (id: string) => dbs.memories.get(id) as MemoryRecord | undefined;

  /**
   * Plans one apply's ops into `w` and `ix`; `overlay` holds the records changed so far in the
   * batch, `answers` the Idempotency-Keys answered so far in it.
   */
  function plan(
    w: Writes,
    ix: IndexWriter,
    overlay: Map<string, MemoryRecord>,
    item: Pending,
    answers = new Set<string>(),
  ) {
    const { ops, actorKeyId, now, idempotency } = item;
    const kept = idempotency && keptAnswer(idempotency, now, answers);
    const applied = ops.map((op): Applied | null => {
      const id = targetOf(op);
      let target: MemoryRecord | undefined;
      if (id !== undefined) {
        target = overlay.get(id) ?? getRecord(id);
        if (!targetIsLive(op, target, now)) return null;
        overlay.set(id, target);
      }
      const namespace = op.event === "ADD" || op.event === "REPLACE" ? op.create.namespace : target!.namespace;
      const { seq, atMs } = clock.next(namespace, now);
      return stage(w, ix, op, planOp(op, target, atMs, actorKeyId), seq, overlay);
    });
    if (idempotency && keepAnswer(w, idempotency, now, kept, applied))
      answers.add(JSON.stringify([idempotency.keyId, idempotency.key]));
    return applied;
  }

  /**
   * The entry stored for an apply's Idempotency-Key, or undefined when there is none or it
   * expired (or is a pending claim of an older release, which nothing finishes now). Throws
   * IdempotencyKeyTaken when an answer is kept, also by an earlier apply of the same batch (in
   * `answers`, staged and not yet readable), so that nothing of this apply is written.
   */
  function keptAnswer(r: IdempotencyRecord, now: number, answers: Set<string>) {
    if (answers.has(JSON.stringify([r.keyId, r.key]))) throw new IdempotencyKeyTaken();
    const e = dbs.idempotency.get(keys.idempotency(r.keyId, r.key)) as IdempotencyEntry | undefined;
    if (e?.state === "done" && e.expiresAt > now) throw new IdempotencyKeyTaken();
    return e;
  }

  /** Stages the answer of an apply with an Idempotency-Key, replacing an expired or pending entry. */
  function keepAnswer(
    w: Writes,
    r: IdempotencyRecord,
    now: number,
    old: IdempotencyEntry | undefined,
    applied: (Applied | null)[],
  ): boolean {
    const answer = r.answer(applied);
    if (!answer) return false;
    if (old) w.remove(dbs.idempotencyExpiries, keys.idempotencyExpiry(old.expiresAt, r.keyId, r.key));
    const entry: IdempotencyEntry = {
      keyId: r.keyId,
      key: r.key,
      hash: r.hash,
      state: "done",
      status: answer.status,
      body: answer.body,
      createdAt: now,
      expiresAt: r.expiresAt,
    };
    w.put(dbs.idempotency, keys.idempotency(r.keyId, r.key), entry);
    w.put(dbs.idempotencyExpiries, keys.idempotencyExpiry(r.expiresAt, r.keyId, r.key), null);
    return true;
  }

  /**
   * Applies that arrive while a write transaction is being set up share it (group commit, as
   * lmdb-js batches transactions), planned in one callback instead of one transaction callback
   * each. Each apply still acts as if alone, in arrival order: later ones see the records
   * of earlier ones through the shared overlay. If any plan throws, the batch is planned again
   * one apply at a time, so only that apply fails and writes nothing.
   */
  let pending: Pending[] | undefined;
  function runBatch(batch: Pending[]) {
    const results: (Applied | null)[][] = [];
    const failures = new Map<number, unknown>();
    // The in-memory keyword lists and vectors follow the commit, as in write().
    const writers: IndexWriter[] = [];
    const token = {};
    inflight.set(token, clock.handedOut);
    const refreshCaches = () => {
      for (const ix of writers) {
        vectorCache.refresh(ix.vectorsTouched);
        keywordCache.refresh(ix.keywordTouched);
      }
      inflight.delete(token);
    };
    env
      .transaction(() =>
        IndexWriter.collect(writers, () => {
          if (pending === batch) pending = undefined;
          clock.sync();
          const w = new Writes();
          try {
            const ix = new IndexWriter(dbs, w, indexOn);
            const overlay = new Map<string, MemoryRecord>();
            const answers = new Set<string>();
            for (const item of batch) results.push(plan(w, ix, overlay, item, answers));
          } catch {
            results.length = 0;
          }
          if (results.length === batch.length) {
            w.apply();
            return;
          }
          batch.forEach((item, i) => {
            const w = new Writes();
            const ix = new IndexWriter(dbs, w, indexOn);
            try {
              results.push(plan(w, ix, new Map(), item));
            } catch (e) {
              results.push([]);
              failures.set(i, e);
              return;
            }
            w.apply();
          });
        }),
      )
      .then(flushed)
      .then(
        () => {
          refreshCaches();
          batch.forEach((item, i) => {
            if (failures.has(i)) item.reject(failures.get(i));
            else item.resolve(results[i]);
          });
        },
        (e) => {
          refreshCaches();
          if (pending === batch) pending = undefined;
          for (const item of batch) item.reject(storageError(e));
        },
      );
  }

  const storage: LmdbStorage = {
    backend: "lmdb",
    env,
    dbs,
    write,

    apply(ops, actorKeyId, now = Date.now(), idempotency) {
      return new Promise((resolve, reject) => {
        const item: Pending = { ops, actorKeyId, now, idempotency, resolve, reject };
        if (pending) pending.push(item);
        else {
          pending = [item];
          runBatch(pending);
        }
      });
    },

    async getMemory(id) {
      return getRecord(id);
    },

    async currentMemories(scope, limit) {
      const now = Date.now();
      const out: MemoryRecord[] = [];
      const byEntity = scope.entity !== undefined;
      const prefix = byEntity ? [scope.namespace, scope.entity!] : [scope.namespace];
      const db = byEntity ? dbs.entityMemories : dbs.namespaceMemories;
      for (const key of db.getKeys({ start: prefix, end: [...prefix, END] })) {
        const r = getRecord((key as string[]).at(-1)!);
        if (isCurrent(r, now)) out.push(r);
        if (out.length >= limit) break;
      }
      return out;
    },

    async newestEvents(scope, limit) {
      const { db, prefix } = keys.eventIndex(scope);
      return loadEvents(dbs[db].getKeys({ start: [...prefix, END], end: prefix, reverse: true, limit }));
    },

    async eventsAfter(scope, afterMs, limit) {
      const { db, prefix } = keys.eventIndex(scope);
      return loadEvents(dbs[db].getKeys({ start: [...prefix, afterMs + 1], end: [...prefix, END], limit }));
    },

    async namespaces({ prefix, after, limit }) {
      const end = [prefix === undefined ? END : prefix + END];
      let start: unknown[] = [prefix ?? ""];
      if (after !== undefined) {
        // Byte order (UTF-8) is the key order; a cursor before the prefix starts at the prefix.
        if (prefix === undefined || after.startsWith(prefix)) start = [after, END];
        else if (Buffer.compare(Buffer.from(after), Buffer.from(prefix)) > 0) return [];
      }
      const out: NamespaceSummary[] = [];
      // A skip scan: the first event key of each namespace, then jump past that namespace.
      for (let ns = firstKey(dbs.eventsByNs, start, end)?.[0]; ns !== undefined; ) {
        const name = ns as string;
        out.push({
          namespace: name,
          memories: dbs.namespaceMemories.getKeysCount({ start: [name], end: [name, END] }),
          lastEventAtMs: lastKey(dbs.eventsByNs, [name])![1] as number,
        });
        if (out.length >= limit) break;
        ns = firstKey(dbs.eventsByNs, [name, END], end)?.[0];
      }
      return out;
    },

    async entities(namespace, { after, limit }) {
      const end = [namespace, END];
      const out: EntitySummary[] = [];
      const first = (start: unknown[]) => firstKey(dbs.eventsByEntity, start, end)?.[1] as string | undefined;
      for (let e = first(after === undefined ? [namespace] : [namespace, after, END]); e !== undefined; ) {
        out.push({
          entity: e,
          memories: dbs.entityMemories.getKeysCount({ start: [namespace, e], end: [namespace, e, END] }),
          lastEventAtMs: lastKey(dbs.eventsByEntity, [namespace, e])![2] as number,
        });
        if (out.length >= limit) break;
        e = first([namespace, e, END]);
      }
      return out;
    },

    async dueExpiries(now, limit) {
      const due = [...dbs.expiries.getKeys({ start: [0], end: [now + 1], limit })] as [number, string][];
      const stale = due.filter(([at, id]) => getRecord(id)?.expiresAt !== at || getRecord(id)?.state !== "current");
      // Index entries of memories retired another way: dropped here, so the scan stays short.
      if (stale.length)
        await write((w) => {
          for (const k of stale) w.remove(dbs.expiries, k);
        });
      return due.filter((k) => !stale.includes(k)).map(([expiresAt, id]) => ({ id, expiresAt }));
    },

    async keywordSearch(scope, terms, filter, limit, now = Date.now()) {
      return keywordSearch(dbs, await keywordCache.get(scope.namespace), scope, terms, filter, limit, now);
    },

    async semanticSearch(scope, vector, filter, limit, now = Date.now()) {
      return semanticSearch(dbs, await vectorCache.get(scope.namespace), scope, vector, filter, limit, now);
    },

    async pendingEmbeddings(limit) {
      const now = Date.now();
      const out = [];
      for (const id of dbs.embedPending.getKeys({ limit: limit * 2 })) {
        const r = getRecord(id as string);
        if (isCurrent(r, now)) out.push({ id: r.id, content: r.content, updatedAt: r.updatedAt });
        if (out.length >= limit) break;
      }
      return out;
    },

    async setVectors(items) {
      return write((w) => {
        const ix = new IndexWriter(dbs, w);
        let n = 0;
        for (const it of items) {
          const r = getRecord(it.id);
          if (r?.state !== "current" || r.updatedAt !== it.updatedAt || dbs.embedPending.get(it.id) === undefined)
            continue;
          ix.setVector(r, it.vector);
          n++;
        }
        return n;
      });
    },

    async rebuildSearchIndex(options = {}) {
      let n = 0;
      await env.transaction(() => {
        n = rebuildIndex(dbs, options.embeddings ?? false);
        // Keyword snapshots of the index before are no longer caught up by its events.
        dbs.meta.putSync("searchEpoch", ((dbs.meta.get("searchEpoch") as number | undefined) ?? 0) + 1);
      });
      vectorCache.clear();
      keywordCache.clear();
      await flushed();
      return n;
    },

    insertKey(key, options = {}) {
      return write((w) => {
        if (options.onlyIfNone && [...dbs.apiKeys.getKeys({ limit: 1 })].length > 0) return false;
        w.put(dbs.apiKeys, key.id, key);
        w.put(dbs.apiKeyHashes, key.hash, key.id);
        return true;
      });
    },
    async getKey(id) {
      return dbs.apiKeys.get(id) as KeyRecord | undefined;
    },
    async keyByHash(hash) {
      // `memd keys` writes from another process, which this process's cached read snapshot may
      // not show yet: renew it, so a key made or revoked there counts at the next request.
      env.resetReadTxn();
      const id = dbs.apiKeyHashes.get(hash) as string | undefined;
      return id === undefined ? undefined : (dbs.apiKeys.get(id) as KeyRecord | undefined);
    },
    async listKeys() {
      // Keys are few (made by hand), so reading them all is fine.
      return [...dbs.apiKeys.getRange({})].map((e) => e.value as KeyRecord);
    },
    async revokeKey(id, at) {
      return write((w) => {
        const k = dbs.apiKeys.get(id) as KeyRecord | undefined;
        if (!k || k.revokedAt !== null) return false;
        w.put(dbs.apiKeys, id, { ...k, revokedAt: at });
        w.remove(dbs.apiKeyHashes, k.hash);
        return true;
      });
    },
    async touchKey(id, at) {
      await env.transaction(() => {
        const k = dbs.apiKeys.get(id) as KeyRecord | undefined;
        if (k) dbs.apiKeys.putSync(id, { ...k, lastUsedAt: at });
      });
    },

    durable: flushed,

    serialize: (namespace, entity, fn) => serialize(JSON.stringify([namespace, entity]), fn),

    ...lmdbLifecycle({ env, dbs, clock, write, stage, getRecord, erased: (ns) => keywordCache.forget(ns) }),

    ...lmdbAsOf(dbs, getRecord),

    async notReadyReason() {
      // isOperational() is in lmdb-js (status "open") but missing from its type declarations.
      if (!(env as unknown as { isOperational(): boolean }).isOperational()) return "the store is not open";
      try {
        // A real read transaction: fails if the environment is broken underneath us.
        dbs.events.getKeys({ reverse: true, limit: 1 }).asArray;
      } catch (e) {
        return `the store cannot be read: ${(e as Error).message}`;
      }
      const s = env.getStats() as { pageSize: number; lastPageNumber: number; mapSize: number };
      // Writes start failing with MDB_MAP_FULL near the end of the map; say so before they do.
      if ((s.lastPageNumber + 1) * s.pageSize > s.mapSize * 0.99) return "the store is full; raise --map-size-mb";
      return undefined;
    },

    async stats() {
      const s = env.getStats() as { pageSize: number; lastPageNumber: number; mapSize: number };
      // A msgpack sub-database's shared structures are one entry more, outside every range: not a record.
      const count = (db: Database) =>
        (db.getStats() as { entryCount: number }).entryCount - (db.get(sharedStructuresKey) === undefined ? 0 : 1);
      return {
        currentMemories: count(dbs.entityMemories),
        memoryRecords: count(dbs.memories),
        events: count(dbs.events),
        pendingEmbeddings: count(dbs.embedPending),
        gauges: {
          memd_lmdb_map_size_bytes: ["Largest size the LMDB file may grow to.", s.mapSize],
          memd_lmdb_used_bytes: [
            "Pages in use in the LMDB file (last page number x page size).",
            (s.lastPageNumber + 1) * s.pageSize,
          ],
        },
      };
    },

    async close() {
      keywordCache.save();
      vectorCache.clear();
      keywordCache.clear();
      await flushed();
      await env.close();
    },
  };

  /** The first key in [start, end), or undefined. */
  function firstKey(db: Database, start: unknown[], end: unknown[]): unknown[] | undefined {
    for (const k of db.getKeys({ start: start as Key, end: end as Key, limit: 1 })) return k as unknown[];
    return undefined;
  }

  /** The last key that starts with `prefix` (times are numbers, so they sort before END). */
  function lastKey(db: Database, prefix: unknown[]): unknown[] | undefined {
    return firstKeyOf(db.getKeys({ start: [...prefix, END] as Key, end: prefix as Key, reverse: true, limit: 1 }));
  }

  function loadEvents(indexKeys: Iterable<Key>): EventRecord[] {
    const out: EventRecord[] = [];
    for (const k of indexKeys as Iterable<unknown[]>) out.push(dbs.events.get(k.at(-1) as number) as EventRecord);
    return out;
  }

  return storage;
}

function firstKeyOf(keys: Iterable<Key>): unknown[] | undefined {
  for (const k of keys) return k as unknown[];
  return undefined;
}

export { FORMAT_VERSION };

/** Puts and removes staged by a write plan; applied together once the plan has finished. */
/** Stages an event and its index entries. */
export function putEvent(w: Writes, dbs: Dbs, event: EventRecord) {
  const { namespace: ns, atMs, seq } = event;
  w.put(dbs.events, seq, event);
  w.put(dbs.eventsByNs, keys.eventByNs(ns, atMs, seq), null);
  // The value says what the event did to which memory (as-of reads fold it without the event).
  w.put(dbs.eventsByEntity, keys.eventByEntity(ns, event.entity, atMs, seq), stateMarks(event));
  w.put(dbs.eventsByMemory, keys.eventByMemory(ns, event.memoryId, atMs, seq), null);
  // A REPLACE also belongs to the history of the memory it superseded.
  if (event.mergedFromId && event.mergedFromId !== event.memoryId)
    w.put(dbs.eventsByMemory, keys.eventByMemory(ns, event.mergedFromId, atMs, seq), null);
}

export class Writes {
  private readonly ops: [db: Database, key: unknown, value: unknown, remove: boolean][] = [];
  put(db: Database, key: unknown, value: unknown) {
    this.ops.push([db, key, value, false]);
  }
  remove(db: Database, key: unknown) {
    this.ops.push([db, key, undefined, true]);
  }
  /** Applies the staged writes inside the current write transaction. */
  apply() {
    for (const [db, key, value, remove] of this.ops) {
      if (remove) db.removeSync(key as Key);
      else db.putSync(key as Key, value);
    }
  }
}

/**
 * Runs `plan` inside one LMDB write transaction (batched with concurrent ones into a shared
 * commit) and resolves with its result once the commit is flushed to disk. `plan` reads the
 * store as it is and stages its changes in `w`; they are applied only if it returns, so a plan
 * that throws writes nothing. Staging instead of a child transaction keeps "both or neither"
 * at a quarter of the cost per request. A plan does not see its own staged writes.
 */
export async function writeDurably<T>(
  env: RootDatabase,
  flushed: () => Promise<void>,
  plan: (w: Writes) => T,
): Promise<T> {
  let result: T | undefined;
  let failure: unknown;
  try {
    await env.transaction(() => {
      const w = new Writes();
      try {
        result = plan(w);
      } catch (e) {
        failure = e;
        return;
      }
      w.apply();
    });
    if (failure === undefined) await flushed();
  } catch (e) {
    throw storageError(e);
  }
  if (failure !== undefined) throw failure;
  return result as T;
}

function storageError(e: unknown): unknown {
  const message = String((e as Error)?.message ?? e);
  if (/MDB_MAP_FULL|ENOSPC|No space left/i.test(message))
    return new StorageError("storage_full", "the store is full; raise --map-size-mb or free disk space");
  return e;
}
