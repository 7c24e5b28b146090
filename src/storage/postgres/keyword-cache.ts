// PostgreSQL's keyword lists in this replica's memory (issue 26): per namespace searched, the
// same KeywordSpace as LMDB's (../keyword-space.ts), so a namespace-wide keyword search scores
// typed arrays instead of joining memory_terms rows in SQL.
//
// Built on the namespace's first search, in slices, in the background: until they are, searches
// take the SQL path (search.ts), so answers are exact from the first request. Kept in step by
// following the namespace's events: per namespace, event times (at_ms) are handed out under the
// namespace_clock row lock, held to the end of the write transaction (schema.ts), so a replica
// that has seen every event up to some time can never see one at or before it later. Before each
// search one statement reads the events after the last one followed and, in the same snapshot,
// the memories they name (memory_id and merged_from_id): each is added (current) or removed.
// What changes memories without events in time order (an import: transfer.ts) bumps the
// namespace's row in search_epochs in its transaction; a replica that sees another epoch drops
// the lists and builds them again. Every candidate is still checked against its memory row by
// the search (search.ts), so a memory that is not current or fails the filter is never returned.
import type { SQL } from "bun";
import { KeywordSpace, packTerms } from "../keyword-space";

/** Sizes (tests make them small): memories read per slice of a build, events per statement when following. */
export const keywordLists = { slice: 2000, followPage: 5000, followPages: 20 };

/** The lists were built under another epoch, or are too far behind: built again. */
class Stale extends Error {}

interface Entry {
  space: KeywordSpace;
  /** The newest event time followed; the search_epochs epoch they were built under. */
  atMs: number;
  epoch: number;
  ready: boolean;
  /** The follow running, and the one that starts after it (shared by the searches that wait for it). */
  running?: Promise<void>;
  next?: Promise<void>;
}

export interface PgKeywordLists {
  /**
   * The namespace's lists, having followed every event committed before this call; undefined
   * while they are being built (the first call starts that), when the caller answers by SQL.
   */
  get(namespace: string): Promise<KeywordSpace | undefined>;
  /** Whether a namespace's lists are built (for tests and the bench). */
  isReady(namespace: string): boolean;
  /** Namespaces whose lists are built, and the documents in them. */
  stats(): { namespaces: number; documents: number };
  /** Stops building (the store closes). */
  close(): void;
}

export function pgKeywordLists(sql: SQL): PgKeywordLists {
  const entries = new Map<string, Entry>();
  let closed = false;

  /** Follows the namespace's events after e.atMs: one statement per page, memories read in its snapshot. */
  const follow = async (ns: string, e: Entry, pages = keywordLists.followPages) => {
    for (let page = 0; ; page++) {
      // Too far behind for one search to wait for: built again (answered by SQL meanwhile).
      if (page >= pages) throw new Stale();
      const [r] = await sql`
        WITH ev AS (SELECT at_ms, memory_id, merged_from_id FROM events
                    WHERE namespace = ${ns} AND at_ms > ${e.atMs} ORDER BY at_ms LIMIT ${keywordLists.followPage}),
             ids AS (SELECT memory_id AS id FROM ev UNION SELECT merged_from_id FROM ev WHERE merged_from_id IS NOT NULL)
        SELECT COALESCE((SELECT epoch FROM search_epochs WHERE namespace = ${ns}), 0) AS epoch,
               (SELECT count(*) FROM ev) AS n, (SELECT max(at_ms) FROM ev) AS last,
               (SELECT json_agg(json_build_array(ids.id, m.state, m.entity, m.content, m.created_at))
                FROM ids LEFT JOIN memories m ON m.id = ids.id AND m.namespace = ${ns}) AS docs`;
      if (Number(r.epoch) !== e.epoch) throw new Stale();
      const n = Number(r.n);
      if (n === 0) return;
      // (json_agg comes back parsed, or as text on some paths.)
      const docs = (typeof r.docs === "string" ? JSON.parse(r.docs) : r.docs) as [
        string,
        string | null,
        string | null,
        string | null,
        number | null,
      ][];
      for (const [id, state, entity, content, createdAt] of docs) {
        if (state === "current") e.space.add(id, packTerms(content!, Number(createdAt), entity!));
        else e.space.remove(id);
      }
      e.atMs = Number(r.last);
      if (n < keywordLists.followPage) return;
    }
  };

  /** A follow that starts after this call: the running one's successor, shared by all who wait. */
  const caughtUp = (ns: string, e: Entry): Promise<void> => {
    if (!e.running) {
      e.running = follow(ns, e).finally(() => {
        e.running = undefined;
      });
      return e.running;
    }
    e.next ??= e.running
      .catch(() => {})
      .then(() => {
        e.next = undefined;
        return caughtUp(ns, e);
      });
    return e.next;
  };

  /** Reads the namespace's current memories in slices, then follows what changed meanwhile. */
  const build = async (ns: string, e: Entry) => {
    // The epoch and the newest event time first: a memory changed after this is named by a later
    // event, which the follow below re-reads.
    const [h] = await sql`SELECT COALESCE((SELECT epoch FROM search_epochs WHERE namespace = ${ns}), 0) AS epoch,
        COALESCE((SELECT max(at_ms) FROM events WHERE namespace = ${ns}), 0) AS at`;
    e.epoch = Number(h.epoch);
    e.atMs = Number(h.at);
    let after = "00000000-0000-0000-0000-000000000000";
    for (;;) {
      if (closed || entries.get(ns) !== e) return;
      const rows = await sql`SELECT id, entity, content, created_at FROM memories
          WHERE namespace = ${ns} AND state = 'current' AND id > ${after}::uuid ORDER BY id LIMIT ${keywordLists.slice}`;
      if (rows.length === 0) break;
      for (const r of rows)
        e.space.add(r.id as string, packTerms(r.content as string, Number(r.created_at), r.entity as string), true);
      after = rows[rows.length - 1].id as string;
    }
    e.space.trim();
    await follow(ns, e, Number.POSITIVE_INFINITY);
    e.ready = true;
  };

  const start = (ns: string) => {
    const e: Entry = { space: new KeywordSpace(), atMs: 0, epoch: 0, ready: false };
    entries.set(ns, e);
    build(ns, e).catch(() => {
      // Tried again on the namespace's next search (answered by SQL meanwhile).
      if (entries.get(ns) === e) entries.delete(ns);
    });
  };

  return {
    async get(ns) {
      if (closed) return undefined;
      const e = entries.get(ns);
      if (!e) {
        start(ns);
        return undefined;
      }
      if (!e.ready) return undefined;
      try {
        await caughtUp(ns, e);
      } catch (err) {
        if (!(err instanceof Stale)) throw err;
        if (entries.get(ns) === e) start(ns);
        return undefined;
      }
      return entries.get(ns) === e ? e.space : undefined;
    },
    isReady: (ns) => entries.get(ns)?.ready === true,
    stats() {
      let namespaces = 0;
      let documents = 0;
      for (const e of entries.values())
        if (e.ready) {
          namespaces++;
          documents += e.space.stats.docs;
        }
      return { namespaces, documents };
    },
    close() {
      closed = true;
      entries.clear();
    },
  };
}
