// The LMDB memory roles: apply (writes.ts, group commit), per-entity serialization, and reads
// of current memories.
import { matchesFilter } from "../ops";
import { isCurrent, type MemoryRecord } from "../records";
import type { ListMemoriesQuery, MemoryReads, MemoryWrites } from "../storage";
import type { Entry } from "./entity-lists";
import { END, keys } from "./layout";
import { flushed, getRecord, type LmdbState } from "./state";
import { enqueue, write } from "./writes";

/** How many index entries one filtered list page reads at most before it answers a short page. */
const MAX_LIST_SCAN = 5000;
/** How many index entries adjacentMemories reads on each side at most. */
const ADJACENT_SCAN = 8;

/** Whether a memory passes a list query's filters. */
export function listed(r: MemoryRecord | undefined, q: ListMemoriesQuery, now: number) {
  return isCurrent(r, now) && matchesFilter(r, q);
}

/**
 * The entries a list query walks, newest first, after its `before`: an entity's from its copy in
 * memory (entity-lists.ts), a namespace's from namespace_memories.
 */
function* entries(s: LmdbState, q: ListMemoriesQuery): Generator<Entry> {
  if (q.entity !== undefined) return yield* s.entityLists.newest(q.namespace, q.entity, q.before);
  const prefix = [q.namespace];
  for (const key of s.dbs.namespaceMemories.getKeys({
    start: q.before !== undefined ? [...prefix, q.before] : [...prefix, END],
    end: prefix,
    exclusiveStart: q.before !== undefined,
    reverse: true,
  })) {
    const id = (key as string[]).at(-1)!;
    yield [id, getRecord(s, id)];
  }
}

export function lmdbMemories(s: LmdbState): MemoryWrites & MemoryReads {
  const { dbs } = s;
  return {
    apply(ops, actorKeyId, now = Date.now(), idempotency) {
      return new Promise((resolve, reject) => enqueue(s, { ops, actorKeyId, now, idempotency, resolve, reject }));
    },

    serialize: (namespace, entity, fn) => s.entityLocks(JSON.stringify([namespace, entity]), fn),

    durable: () => flushed(s),

    async getMemory(id) {
      return getRecord(s, id);
    },

    async currentMemories(scope, limit) {
      const now = Date.now();
      const out: MemoryRecord[] = [];
      const byEntity = scope.entity !== undefined;
      const prefix = byEntity ? [scope.namespace, scope.entity!] : [scope.namespace];
      const db = byEntity ? dbs.entityMemories : dbs.namespaceMemories;
      for (const key of db.getKeys({ start: prefix, end: [...prefix, END] })) {
        const r = getRecord(s, (key as string[]).at(-1)!);
        if (isCurrent(r, now)) out.push(r);
        if (out.length >= limit) break;
      }
      return out;
    },

    async listMemories(q) {
      const now = Date.now();
      const out: MemoryRecord[] = [];
      let lastScanned: string | undefined;
      let scanned = 0;
      for (const [id, r] of entries(s, q)) {
        if (scanned++ >= MAX_LIST_SCAN) return { memories: out, next: lastScanned };
        if (listed(r, q, now)) {
          // One more match than asked: there is a next page, continuing after the last one shown.
          if (out.length === q.limit) return { memories: out, next: out.at(-1)!.id };
          out.push(r!);
        }
        lastScanned = id;
      }
      return { memories: out };
    },

    async adjacentMemories(memories, now) {
      const out: [string, MemoryRecord][] = [];
      for (const m of memories) {
        const prefix = [m.namespace, m.entity];
        for (const reverse of [true, false]) {
          // The nearest current one; entries of memories just retired (or past their TTL) are passed over.
          let scanned = 0;
          for (const key of dbs.entityMemories.getKeys({
            start: [...prefix, m.id],
            end: reverse ? prefix : [...prefix, END],
            exclusiveStart: true,
            reverse,
          })) {
            const r = getRecord(s, (key as string[]).at(-1)!);
            if (isCurrent(r, now)) {
              out.push([m.id, r!]);
              break;
            }
            if (++scanned >= ADJACENT_SCAN) break;
          }
        }
      }
      return out;
    },

    async memoryByKey(namespace, entity, key, now = Date.now()) {
      const id = dbs.memoryKeys.get(keys.memoryKey(namespace, entity, key)) as string | undefined;
      const r = id === undefined ? undefined : getRecord(s, id);
      return isCurrent(r, now) ? r : undefined;
    },

    async dueExpiries(now, limit) {
      const due = [...dbs.expiries.getKeys({ start: [0], end: [now + 1], limit })] as [number, string][];
      const stale = due.filter(
        ([at, id]) => getRecord(s, id)?.expiresAt !== at || getRecord(s, id)?.state !== "current",
      );
      // Index entries of memories retired another way: dropped here, so the scan stays short.
      if (stale.length)
        await write(s, (w) => {
          for (const k of stale) w.remove(dbs.expiries, k);
        });
      return due.filter((k) => !stale.includes(k)).map(([expiresAt, id]) => ({ id, expiresAt }));
    },
  };
}
