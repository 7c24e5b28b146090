// The LMDB browse reads: skip scans over the event indexes, one probe per namespace or entity.
import type { Database, Key } from "lmdb";
import type { Browse, EntitySummary, NamespaceSummary } from "../storage";
import { END } from "./layout";
import type { LmdbState } from "./state";

export function lmdbBrowse(s: LmdbState): Browse {
  const { dbs } = s;
  return {
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

    async entities(namespace, { prefix, after, limit }) {
      const end = [namespace, prefix === undefined ? END : prefix + END];
      let start: unknown[] = prefix === undefined ? [namespace] : [namespace, prefix];
      if (after !== undefined) {
        // As for namespaces: a cursor before the prefix starts at the prefix, one past it ends the list.
        if (prefix === undefined || after.startsWith(prefix)) start = [namespace, after, END];
        else if (Buffer.compare(Buffer.from(after), Buffer.from(prefix)) > 0) return [];
      }
      const out: EntitySummary[] = [];
      const first = (from: unknown[]) => firstKey(dbs.eventsByEntity, from, end)?.[1] as string | undefined;
      for (let e = first(start); e !== undefined; ) {
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
  };
}

/** The first key in [start, end), or undefined. */
function firstKey(db: Database, start: unknown[], end: unknown[]): unknown[] | undefined {
  for (const k of db.getKeys({ start: start as Key, end: end as Key, limit: 1 })) return k as unknown[];
  return undefined;
}

/** The last key that starts with `prefix` (times are numbers, so they sort before END). */
function lastKey(db: Database, prefix: unknown[]): unknown[] | undefined {
  return firstKeyOf(db.getKeys({ start: [...prefix, END] as Key, end: prefix as Key, reverse: true, limit: 1 }));
}

function firstKeyOf(keys: Iterable<Key>): unknown[] | undefined {
  for (const k of keys) return k as unknown[];
  return undefined;
}
