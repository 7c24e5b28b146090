// The LMDB side of a memory's whole life: paged lists, erasure, export and import, idempotent
// answers. Kept apart from index.ts, which holds the hot path (apply); these methods are spread
// into the storage object there.
import type { RootDatabase } from "lmdb";
import { matchesFilter, type Planned, planOp } from "../ops";
import type { ErasureRecord, EventRecord, ExportRecord, IdempotencyEntry, KeyRecord, MemoryRecord } from "../records";
import { isCurrent } from "../records";
import type { Applied, Erasure, Idempotency, ListMemoriesQuery, MemoryOp, MemoryReads, Transfer } from "../storage";
import type { EventClock } from "./clock";
import { type Dbs, putEvent, type Writes } from "./index";
import { END, keys } from "./layout";
import { IndexWriter } from "./search";

/** How many index entries one filtered list page reads at most before it answers a short page. */
const MAX_LIST_SCAN = 5000;
const uuidPattern = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/gi;

export interface LifecycleContext {
  env: RootDatabase;
  dbs: Dbs;
  clock: EventClock;
  write<T>(plan: (w: Writes) => T): Promise<T>;
  stage(w: Writes, ix: IndexWriter, op: MemoryOp, p: Planned, seq: number, overlay: Map<string, MemoryRecord>): Applied;
  getRecord(id: string): MemoryRecord | undefined;
  /** After an erasure in a namespace has committed (its keyword snapshot is deleted). */
  erased(namespace: string): void;
}

type Methods = Pick<MemoryReads, "listMemories"> & Erasure & Transfer & Idempotency;

/** A memory record without anything a person said: what an erasure leaves. */
export function scrubbed(r: MemoryRecord): MemoryRecord {
  const { tags: _t, metadata: _m, source: _s, ...rest } = r;
  return { ...rest, content: "" };
}

/** An event without contents (its tags and metadata too), reason `erased`: what an erasure leaves. */
export function scrubbedEvent(e: EventRecord): EventRecord {
  const { tags: _t, metadata: _m, ...rest } = e;
  return { ...rest, oldContent: null, newContent: null, reason: "erased" };
}

/** Whether a memory passes a list query's filters. */
export function listed(r: MemoryRecord | undefined, q: ListMemoriesQuery, now: number) {
  return isCurrent(r, now) && matchesFilter(r, q);
}

/** The key of an exported record in its sub-database. */
function recordKey(r: ExportRecord): unknown {
  switch (r.type) {
    case "memory":
      return r.id;
    case "event":
      return r.seq;
    case "key":
      return r.id;
    case "erasure":
      return keys.erasure(r.namespace, r.entity, r.atMs);
  }
}

const withoutType = (r: ExportRecord) => {
  const { type: _type, ...rest } = r;
  return rest;
};

export function lmdbLifecycle(ctx: LifecycleContext): Methods {
  const { env, dbs, clock, write, stage, getRecord, erased } = ctx;
  const dbOf = (r: ExportRecord) =>
    ({ memory: dbs.memories, event: dbs.events, key: dbs.apiKeys, erasure: dbs.erasures })[r.type];

  return {
    async listMemories(q) {
      const now = Date.now();
      const byEntity = q.entity !== undefined;
      const prefix = byEntity ? [q.namespace, q.entity!] : [q.namespace];
      const db = byEntity ? dbs.entityMemories : dbs.namespaceMemories;
      const out: MemoryRecord[] = [];
      let lastScanned: string | undefined;
      let scanned = 0;
      const range = db.getKeys({
        start: q.before !== undefined ? [...prefix, q.before] : [...prefix, END],
        end: prefix,
        exclusiveStart: q.before !== undefined,
        reverse: true,
      });
      for (const key of range) {
        const id = (key as string[]).at(-1)!;
        if (scanned++ >= MAX_LIST_SCAN) return { memories: out, next: lastScanned };
        const r = getRecord(id);
        if (listed(r, q, now)) {
          // One more match than asked: there is a next page, continuing after the last one shown.
          if (out.length === q.limit) return { memories: out, next: out.at(-1)!.id };
          out.push(r!);
        }
        lastScanned = id;
      }
      return { memories: out };
    },

    async erase(namespace, entity, actorKeyId, now = Date.now()) {
      const done = await write((w) => {
        clock.sync();
        // Every memory of the entity has at least its ADD or REPLACE event under the entity.
        const ids = new Set<string>();
        const seqs = new Set<number>();
        const entityRange = dbs.eventsByEntity.getKeys({ start: [namespace, entity], end: [namespace, entity, END] });
        for (const k of entityRange) {
          const seq = (k as unknown[]).at(-1) as number;
          const e = dbs.events.get(seq) as EventRecord;
          ids.add(e.memoryId);
          if (e.mergedFromId) ids.add(e.mergedFromId);
        }
        for (const k of dbs.entityMemories.getKeys({ start: [namespace, entity], end: [namespace, entity, END] }))
          ids.add((k as string[])[2]);
        const mine = [...ids].sort().filter((id) => {
          const r = getRecord(id);
          return r !== undefined && r.namespace === namespace && r.entity === entity;
        });
        for (const id of mine)
          for (const k of dbs.eventsByMemory.getKeys({ start: [namespace, id], end: [namespace, id, END] }))
            seqs.add((k as unknown[]).at(-1) as number);

        const overlay = new Map<string, MemoryRecord>();
        const ix = new IndexWriter(dbs, w);
        let deleted = 0;
        for (const id of mine) {
          const r = getRecord(id)!;
          if (r.state === "current") {
            // Through the same staging as every delete, so every index of the memory follows.
            overlay.set(id, r);
            const { seq, atMs } = clock.next(namespace, now);
            const op: MemoryOp = { event: "DELETE", target: id, reason: "erased" };
            const p = planOp(op, r, atMs, actorKeyId);
            stage(w, ix, op, { ...p, event: { ...p.event, oldContent: null } }, seq, overlay);
            deleted++;
          }
          // Staged after the DELETE's own write of the record, so this one wins.
          w.put(dbs.memories, id, scrubbed(overlay.get(id) ?? r));
        }
        for (const seq of seqs) w.put(dbs.events, seq, scrubbedEvent(dbs.events.get(seq) as EventRecord));

        const erased = new Set(mine);
        // Stored answers that name an erased memory (a store's answer holds its content).
        for (const { key, value } of dbs.idempotency.getRange({})) {
          const entry = value as IdempotencyEntry;
          if (entry.body?.match(uuidPattern)?.some((id) => erased.has(id.toLowerCase()))) {
            w.remove(dbs.idempotency, key);
            w.remove(dbs.idempotencyExpiries, keys.idempotencyExpiry(entry.expiresAt, entry.keyId, entry.key));
          }
        }

        let atMs = now;
        while (dbs.erasures.get(keys.erasure(namespace, entity, atMs)) !== undefined) atMs++;
        const erasure: ErasureRecord = {
          namespace,
          entity,
          atMs,
          actorKeyId,
          memories: mine.length,
          events: seqs.size + deleted,
        };
        w.put(dbs.erasures, keys.erasure(namespace, entity, atMs), erasure);
        return erasure;
      });
      erased(namespace);
      return done;
    },

    async erasures(namespace, entity) {
      const prefix = entity === undefined ? [namespace] : [namespace, entity];
      return [...dbs.erasures.getRange({ start: prefix, end: [...prefix, END] })]
        .map((e) => e.value as ErasureRecord)
        .sort((a, b) => a.atMs - b.atMs);
    },

    async *exportAll({ namespaces, keys: withKeys }) {
      // One read transaction for the whole export: a consistent snapshot while writers go on.
      const transaction = env.useReadTransaction();
      try {
        const wanted = namespaces && new Set(namespaces);
        for (const { value } of dbs.memories.getRange({ transaction })) {
          const m = value as MemoryRecord;
          if (!wanted || wanted.has(m.namespace)) yield { type: "memory", ...m };
        }
        // In seq order, as PostgreSQL exports them, so both write the same file.
        for (const { value } of dbs.events.getRange({ transaction })) {
          const e = value as EventRecord;
          if (!wanted || wanted.has(e.namespace)) yield { type: "event", ...e };
        }
        for (const { value } of dbs.erasures.getRange({ transaction })) {
          const e = value as ErasureRecord;
          if (!wanted || wanted.has(e.namespace)) yield { type: "erasure", ...e };
        }
        if (withKeys)
          for (const { value } of dbs.apiKeys.getRange({ transaction })) yield { type: "key", ...(value as KeyRecord) };
      } finally {
        transaction.done();
      }
    },

    async existing(records) {
      return records.map((r) => {
        const found = dbOf(r).get(recordKey(r) as string);
        if (found === undefined) return "absent";
        return Bun.deepEquals(found, withoutType(r)) ? "identical" : "different";
      });
    },

    importRecords(records, options) {
      return write((w) => {
        let written = 0;
        let skipped = 0;
        const inBatch = new Set<string>();
        // Imported current memories join the keyword index at once; their vectors come from `memd reindex`.
        const ix = new IndexWriter(dbs, w);
        // Renumbered events take the seqs after the last one handed out (the clock's rule), in order.
        let nextSeq: number | undefined;
        for (let r of records) {
          if (options.renumberEvents && r.type === "event") {
            nextSeq ??= Math.max(
              ([...dbs.events.getKeys({ reverse: true, limit: 1 })][0] as number | undefined) ?? 0,
              (dbs.meta.get("seqFloor") as number | undefined) ?? 0,
            );
            r = { ...r, seq: ++nextSeq };
          }
          const key = recordKey(r);
          const batchKey = `${r.type} ${JSON.stringify(key)}`;
          const found = dbOf(r).get(key as string);
          if (found !== undefined || inBatch.has(batchKey)) {
            const identical = found !== undefined && Bun.deepEquals(found, withoutType(r));
            if (options.skipExisting || (options.skipIdentical && identical)) {
              skipped++;
              continue;
            }
            throw new Error(`${r.type} ${JSON.stringify(key)} already exists`);
          }
          inBatch.add(batchKey);
          written++;
          const rec = withoutType(r);
          if (r.type === "memory") {
            w.put(dbs.memories, r.id, rec);
            if (r.state === "current") {
              w.put(dbs.entityMemories, keys.entityMemory(r.namespace, r.entity, r.id), null);
              if (r.expiresAt !== undefined) w.put(dbs.expiries, keys.expiry(r.expiresAt, r.id), null);
              ix.add(rec as MemoryRecord);
            }
          } else if (r.type === "event") putEvent(w, dbs, rec as EventRecord);
          else if (r.type === "key") {
            w.put(dbs.apiKeys, r.id, rec);
            if (r.revokedAt === null) w.put(dbs.apiKeyHashes, r.hash, r.id);
          } else w.put(dbs.erasures, key, rec);
        }
        // Every clock (this process's and a running server's) re-reads the last seq and times.
        if (options.seqFloor !== undefined)
          w.put(
            dbs.meta,
            "seqFloor",
            Math.max(options.seqFloor, (dbs.meta.get("seqFloor") as number | undefined) ?? 0),
          );
        if (written > 0 || options.seqFloor !== undefined)
          w.put(dbs.meta, "clockEpoch", ((dbs.meta.get("clockEpoch") as number | undefined) ?? 0) + 1);
        return { written, skipped };
      });
    },

    async idempotentAnswer(keyId, key, now) {
      const e = dbs.idempotency.get(keys.idempotency(keyId, key)) as IdempotencyEntry | undefined;
      return e?.state === "done" && e.expiresAt > now ? e : undefined;
    },

    sweepIdempotency(now, limit) {
      const due = [...dbs.idempotencyExpiries.getKeys({ start: [0], end: [now + 1], limit })] as [
        number,
        string,
        string,
      ][];
      if (due.length === 0) return Promise.resolve(0);
      return write((w) => {
        for (const [at, keyId, key] of due) {
          w.remove(dbs.idempotencyExpiries, [at, keyId, key]);
          const e = dbs.idempotency.get(keys.idempotency(keyId, key)) as IdempotencyEntry | undefined;
          if (e && e.expiresAt === at) w.remove(dbs.idempotency, keys.idempotency(keyId, key));
        }
        return due.length;
      });
    },
  };
}
