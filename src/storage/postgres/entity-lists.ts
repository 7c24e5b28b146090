// The newest current memories of the entities listed most, kept in this replica's memory for list
// reads (../entity-lists.ts): the context block without a query reads an entity's newest 1,000
// memories on every call, ~5 ms of rows on PostgreSQL. A copy is exact for the same reason the
// replicas' keyword lists are (follow.ts): per namespace, event times are handed out under the
// namespace_clock row lock held to the commit, so they commit in time order, and every change of an
// entity's memories writes an event under that entity in its transaction; an import, whose events
// are not in time order, bumps the namespace's search_epochs row. So a copy whose entity's newest
// event time and namespace epoch are still those of a statement's snapshot holds exactly what that
// snapshot holds. Each read checks both in one statement, which also reads the rows again when
// either moved; a copy answers pages with a bounded filter only (no key or entity prefix).
import type { SQL } from "bun";
import { deepFreeze, entityLists } from "../entity-lists";
import { matchesFilter } from "../ops";
import { isCurrent, type MemoryRecord } from "../records";
import type { ListMemoriesQuery, MemoryPage } from "../storage";
import { memoryOf, type Row } from "./rows";

interface Copy {
  /** The entity's newest event time and the namespace's epoch when read. */
  last: number;
  epoch: number;
  /** Its current memories (state current; expiry is checked when read), newest first. */
  records: MemoryRecord[];
  /** Whether it holds every one (else the newest maxEntries). */
  complete: boolean;
}

export class PgEntityLists {
  private readonly copies = new Map<string, Copy>();
  private held = 0;

  constructor(private readonly read: <T>(fn: (q: SQL) => Promise<T>) => Promise<T>) {}

  /** Memories kept in memory now (for /metrics and tests). */
  get entries(): number {
    return this.held;
  }

  /**
   * The page `q` asks for, from the entity's copy brought up to date, as the SQL list would
   * answer it; undefined when the copy cannot answer it (no entity, a key or entity prefix, a
   * small first page of an entity not kept, or a page past what the copy holds).
   */
  async list(q: ListMemoriesQuery, now: number): Promise<MemoryPage | undefined> {
    if (q.entity === undefined || q.key !== undefined || q.entityPrefix !== undefined) return undefined;
    const name = JSON.stringify([q.namespace, q.entity]);
    let copy = this.copies.get(name);
    if (!copy && (q.before !== undefined || q.limit < entityLists.minEntries)) return undefined;
    const [last, epoch] = copy ? [copy.last, copy.epoch] : [-1, -1];
    // One statement, one snapshot: the stamp, and the rows when it moved since the copy.
    const rows: Row[] = await this.read(
      (sql) => sql`WITH st AS (
          SELECT COALESCE((SELECT max(at_ms) FROM events WHERE namespace = ${q.namespace} AND entity = ${q.entity}), 0) AS st_last,
                 COALESCE((SELECT epoch FROM search_epochs WHERE namespace = ${q.namespace}), 0) AS st_epoch)
        SELECT st.st_last, st.st_epoch, m.* FROM st LEFT JOIN LATERAL (
          SELECT * FROM memories WHERE state = 'current' AND namespace = ${q.namespace} AND entity = ${q.entity}
            AND NOT (st.st_last = ${last} AND st.st_epoch = ${epoch})
          ORDER BY id DESC LIMIT ${entityLists.maxEntries + 1}) m ON true`,
    );
    const stamp = { last: Number(rows[0].st_last), epoch: Number(rows[0].st_epoch) };
    if (copy && stamp.last === copy.last && stamp.epoch === copy.epoch) {
      // The most recently read last (a Map keeps insertion order).
      this.copies.delete(name);
      this.copies.set(name, copy);
    } else {
      this.forget(name);
      const records = rows.filter((r) => r.id !== null).map((r) => deepFreeze(memoryOf(r)));
      copy = {
        ...stamp,
        records: records.slice(0, entityLists.maxEntries),
        complete: records.length <= entityLists.maxEntries,
      };
      if (copy.records.length >= entityLists.minEntries) {
        this.copies.set(name, copy);
        this.held += copy.records.length;
        this.bound();
      }
    }
    return page(copy, q, now);
  }

  /** Forgets an entity's copy (name: JSON of [namespace, entity]). */
  forget(name: string) {
    const copy = this.copies.get(name);
    if (!copy) return;
    this.copies.delete(name);
    this.held -= copy.records.length;
  }

  /** Drops the least recently read copies while over the total. */
  private bound() {
    for (const name of this.copies.keys()) {
      if (this.held <= entityLists.totalEntries) return;
      this.forget(name);
    }
  }
}

/** The page of `q` from `copy`, as the SQL list answers it (limit + 1 read: a next page). */
function page(copy: Copy, q: ListMemoriesQuery, now: number): MemoryPage | undefined {
  const { records } = copy;
  let i = 0;
  // Newest first: the first one older than `before` (ids are lower case, as uuid's text is).
  const before = q.before?.toLowerCase();
  if (before !== undefined)
    for (let hi = records.length; i < hi; ) {
      const mid = (i + hi) >>> 1;
      if (records[mid].id >= before) i = mid + 1;
      else hi = mid;
    }
  const out: MemoryRecord[] = [];
  for (; i < records.length; i++) {
    const r = records[i];
    if (!isCurrent(r, now) || !matchesFilter(r, q)) continue;
    if (out.length === q.limit) return { memories: out, next: out.at(-1)!.id };
    out.push(r);
  }
  return copy.complete ? { memories: out } : undefined;
}
