// The newest current memories of the entities listed most, kept in this replica's memory for list
// reads (../entity-lists.ts): the context block without a query reads an entity's newest 1,000
// memories on every call, ~5 ms of rows on PostgreSQL. A copy is exact for the same reason the
// replicas' keyword lists are (follow.ts): per namespace, event times are handed out under the
// namespace_clock row lock held to the commit, so they commit in time order, and every change of an
// entity's memories writes an event under that entity in its transaction; an import, whose events
// are not in time order, bumps the namespace's search_epochs row. So a copy whose entity's newest
// event time and namespace epoch are still those of a statement's snapshot holds exactly what that
// snapshot holds. Each read checks both in one statement, which also reads the memories the events
// since name (or every row again, after an import); a copy answers pages with a bounded filter only
// (no key or entity prefix).
import type { SQL } from "bun";
import { deepFreeze, entityLists, recordBytes } from "../entity-lists";
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
  /** It holds every current memory with an id at or above this one; undefined: every one. */
  from: string | undefined;
  /** What its records cost (recordBytes). */
  bytes: number;
}

export class PgEntityLists {
  private readonly copies = new Map<string, Copy>();
  private held = 0;
  private bytes = 0;
  /** Erasures on this replica so far: a read that an erasure overlapped keeps nothing it read. */
  private erasures = 0;

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
    const erasures = this.erasures;
    // One statement, one snapshot: the stamp; when only events came since the copy (few), the
    // rows of the memories they name; when the copy is missing or the epoch moved, every row.
    const rows: Row[] = await this.read(
      (sql) => sql`WITH st AS (
          SELECT COALESCE((SELECT max(at_ms) FROM events WHERE namespace = ${q.namespace} AND entity = ${q.entity}), 0) AS st_last,
                 COALESCE((SELECT epoch FROM search_epochs WHERE namespace = ${q.namespace}), 0) AS st_epoch),
        ch AS (
          SELECT DISTINCT x.id FROM events e CROSS JOIN LATERAL (VALUES (e.memory_id), (e.merged_from_id)) AS x(id)
          WHERE e.namespace = ${q.namespace} AND e.entity = ${q.entity} AND e.at_ms > ${last} AND x.id IS NOT NULL
            AND ${last} >= 0 AND (SELECT st_epoch FROM st) = ${epoch}),
        how AS (
          SELECT CASE WHEN st_last = ${last} AND st_epoch = ${epoch} THEN 'same'
            WHEN st_epoch = ${epoch} AND ${last} >= 0 AND (SELECT count(*) FROM ch) <= ${entityLists.maxCatchUp} THEN 'changes'
            ELSE 'all' END AS how FROM st)
        SELECT st.st_last, st.st_epoch, how.how, m.* FROM st CROSS JOIN how LEFT JOIN LATERAL (
          (SELECT * FROM memories WHERE how.how = 'all' AND state = 'current' AND namespace = ${q.namespace}
            AND entity = ${q.entity} ORDER BY id DESC LIMIT ${entityLists.maxEntries + 1})
          UNION ALL
          SELECT * FROM memories WHERE how.how = 'changes' AND id IN (SELECT id FROM ch)) m ON true`,
    );
    // An erasure committed while this statement ran: its rows may hold the erased contents, which
    // must not stay in memory; the SQL answers this page.
    if (this.erasures !== erasures) return undefined;
    const stamp = { last: Number(rows[0].st_last), epoch: Number(rows[0].st_epoch) };
    const how = rows[0].how as "same" | "changes" | "all";
    const read = rows.filter((r) => r.id !== null).map((r) => deepFreeze(memoryOf(r)));
    if (copy && how !== "all") {
      // Another read moved the copy while this one waited: its rows are of another snapshot than
      // this statement's, so this page is the SQL's.
      if (this.copies.get(name) !== copy || copy.last !== last || copy.epoch !== epoch) return undefined;
      if (how === "changes") this.apply(copy, read, q.namespace, q.entity);
      Object.assign(copy, stamp);
      // The most recently read last (a Map keeps insertion order); what it followed counts in the totals.
      this.copies.delete(name);
      this.copies.set(name, copy);
      this.bound();
    } else {
      this.forget(name);
      // The newest, up to maxEntries and totalBytes.
      let bytes = 0;
      let n = 0;
      for (; n < read.length && n < entityLists.maxEntries; n++) {
        const b = recordBytes(read[n]);
        if (bytes + b > entityLists.totalBytes) break;
        bytes += b;
      }
      const records = read.slice(0, n);
      copy = {
        ...stamp,
        records,
        // (None kept of some: "" holds nothing, so the page is the SQL's.)
        from: n === read.length ? undefined : (records.at(-1)?.id ?? ""),
        bytes,
      };
      if (records.length >= entityLists.minEntries) {
        this.copies.set(name, copy);
        this.held += records.length;
        this.bytes += bytes;
        this.bound();
      }
    }
    return page(copy, q, now);
  }

  /** Puts the memories the events since named as they are now: kept, moved or dropped. */
  private apply(copy: Copy, changed: readonly MemoryRecord[], namespace: string, entity: string) {
    for (const r of changed) {
      const i = place(copy.records, r.id);
      if (copy.records[i]?.id === r.id) {
        const b = recordBytes(copy.records[i]);
        copy.records.splice(i, 1);
        copy.bytes -= b;
        this.held--;
        this.bytes -= b;
      }
      const listed = r.state === "current" && r.namespace === namespace && r.entity === entity;
      if (listed && (copy.from === undefined || r.id >= copy.from)) {
        const b = recordBytes(r);
        copy.records.splice(i, 0, r);
        copy.bytes += b;
        this.held++;
        this.bytes += b;
      }
    }
  }

  /** Forgets an entity's copy (name: JSON of [namespace, entity]). */
  forget(name: string) {
    const copy = this.copies.get(name);
    if (!copy) return;
    this.copies.delete(name);
    this.held -= copy.records.length;
    this.bytes -= copy.bytes;
  }

  /** After an erasure of the entity on this replica (its copy held the erased contents). */
  erased(name: string) {
    this.erasures++;
    this.forget(name);
  }

  /** Drops the least recently read copies while over a total (a copy over one alone goes too). */
  private bound() {
    for (const name of this.copies.keys()) {
      if (this.held <= entityLists.totalEntries && this.bytes <= entityLists.totalBytes) return;
      this.forget(name);
    }
  }
}

/** Where `id` is or would go in records sorted newest first (by id, descending). */
function place(records: readonly MemoryRecord[], id: string): number {
  let lo = 0;
  for (let hi = records.length; lo < hi; ) {
    const mid = (lo + hi) >>> 1;
    if (records[mid].id > id) lo = mid + 1;
    else hi = mid;
  }
  return lo;
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
  return copy.from === undefined ? { memories: out } : undefined;
}
