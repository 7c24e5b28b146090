// The LMDB export (one read transaction: a consistent snapshot) and import of records as they are.
import type { ErasureRecord, EventRecord, ExportRecord, KeyRecord, MemoryRecord } from "../records";
import type { Transfer } from "../storage";
import { IndexWriter } from "./index-writer";
import { keys } from "./layout";
import { putEvent } from "./staging";
import type { LmdbState } from "./state";
import { write } from "./writes";

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

export function lmdbTransfer(s: LmdbState): Transfer {
  const { env, dbs } = s;
  const dbOf = (r: ExportRecord) =>
    ({ memory: dbs.memories, event: dbs.events, key: dbs.apiKeys, erasure: dbs.erasures })[r.type];
  return {
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

    async importRecords(records, options) {
      const done = await write(s, (w) => {
        let written = 0;
        let skipped = 0;
        const inBatch = new Set<string>();
        // Keys held by current memories of this batch (staged, not yet readable).
        const keyHolders = new Map<string, string>();
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
              if (r.key !== undefined) {
                const k = keys.memoryKey(r.namespace, r.entity, r.key);
                const holder = keyHolders.get(JSON.stringify(k)) ?? (dbs.memoryKeys.get(k) as string | undefined);
                if (holder !== undefined && holder !== r.id)
                  throw new Error(`memory ${r.id}: key ${JSON.stringify(r.key)} is held by current memory ${holder}`);
                keyHolders.set(JSON.stringify(k), r.id);
                w.put(dbs.memoryKeys, k, r.id);
              }
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
      // Namespaces the import made big get their keyword snapshot in the background.
      if (done.written > 0) s.keywordCache.wake();
      return done;
    },

    async prepareSearch(namespaces) {
      if (!s.indexOn) return 0;
      // The clock re-reads the last seq the imports left (they write their events' own seqs, not
      // ones it handed out): the snapshots are taken as of it, so a server reading one catches up
      // from there, not from the namespace's first event (every memory read again).
      s.clock.sync();
      let n = 0;
      for (const ns of namespaces) if ((await s.keywordCache.persist(ns)) > 0) n++;
      return n;
    },
  };
}
