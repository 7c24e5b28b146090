// The LMDB erasure of an entity, in one write transaction, and the record of erasures.

import { uuidsIn } from "../../wire/schemas";
import { planOp } from "../ops";
import type { ErasureRecord, EventRecord, IdempotencyEntry, MemoryRecord } from "../records";
import type { Erasure, MemoryOp } from "../storage";
import { IndexWriter } from "./index-writer";
import { END, keys } from "./layout";
import { getRecord, type LmdbState } from "./state";
import { stage, write } from "./writes";

/** A memory record without anything a person said: what an erasure leaves. */
export function scrubbed(r: MemoryRecord): MemoryRecord {
  const { tags: _t, metadata: _m, source: _s, key: _k, ...rest } = r;
  return { ...rest, content: "" };
}

/** An event without contents (its tags and metadata too), reason `erased`: what an erasure leaves. */
export function scrubbedEvent(e: EventRecord): EventRecord {
  const { tags: _t, metadata: _m, ...rest } = e;
  return { ...rest, oldContent: null, newContent: null, reason: "erased" };
}

export function lmdbErasure(s: LmdbState): Erasure {
  const { dbs, clock } = s;
  return {
    async erase(namespace, entity, actorKeyId, now = Date.now()) {
      const done = await write(s, (w) => {
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
          const r = getRecord(s, id);
          return r !== undefined && r.namespace === namespace && r.entity === entity;
        });
        for (const id of mine)
          for (const k of dbs.eventsByMemory.getKeys({ start: [namespace, id], end: [namespace, id, END] }))
            seqs.add((k as unknown[]).at(-1) as number);

        const overlay = new Map<string, MemoryRecord>();
        const ix = new IndexWriter(dbs, w);
        let deleted = 0;
        for (const id of mine) {
          const r = getRecord(s, id)!;
          if (r.state === "current") {
            // Through the same staging as every delete, so every index of the memory follows.
            overlay.set(id, r);
            const { seq, atMs } = clock.next(namespace, now);
            const op: MemoryOp = { event: "DELETE", target: id, reason: "erased" };
            const p = planOp(op, r, atMs, actorKeyId);
            stage(s, w, ix, op, { ...p, event: { ...p.event, oldContent: null } }, seq, overlay);
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
          if (entry.body !== undefined && uuidsIn(entry.body).some((id) => erased.has(id))) {
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
        // Its place in the trail, after its DELETEs: webhooks deliver the erasure itself from there.
        w.put(dbs.erasureSeqs, clock.next(namespace, now).seq, erasure);
        return erasure;
      });
      // The entity's list in memory held the erased contents.
      s.entityLists.forget(namespace, entity);
      // Its keyword snapshot is deleted (it may hold the erased words).
      s.keywordCache.forget(namespace);
      // And its vector snapshot (it holds the erased memories' vectors).
      s.vectorCache.forget(namespace);
      return done;
    },

    async erasures(namespace, entity) {
      const prefix = entity === undefined ? [namespace] : [namespace, entity];
      return [...dbs.erasures.getRange({ start: prefix, end: [...prefix, END] })]
        .map((e) => e.value as ErasureRecord)
        .sort((a, b) => a.atMs - b.atMs);
    },
  };
}
