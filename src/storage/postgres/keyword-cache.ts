// PostgreSQL's keyword lists in this replica's memory (issue 26): per namespace searched, the
// same KeywordSpace as LMDB's (src/index/keyword/), so a namespace-wide keyword search scores
// typed arrays instead of joining memory_terms rows in SQL.
//
// Built on the namespace's first search, in slices, in the background: until they are, searches
// take the SQL path (search.ts), so answers are exact from the first request. Kept in step by the
// namespace's follower (follow.ts), which reads its changes before each search, once for the lists
// and the vectors alike: each memory named is added (current) or removed. An import bumps the
// namespace's search_epochs row; lists that see another epoch are dropped and built again. Every
// candidate is still checked against its memory row by the search (search.ts), so a memory that
// is not current or fails the filter is never returned.
import type { SQL } from "bun";
import { KeywordSpace, packTerms } from "../../index/keyword";
import type { SearchMemory } from "../search-memory";
import { type Change, type Copy, type PgFollowers, startingPoint } from "./follow";

/** Sizes (tests make them small): memories read per slice of a build. */
export const keywordLists = { slice: 2000 };

/** One namespace's lists, as its follower sees them. */
class Lists implements Copy {
  readonly wants = "memories";
  space = new KeywordSpace(undefined, true);
  upto = 0;
  epoch = 0;
  ready = false;
  dropped?: Copy["dropped"];
  apply(c: Change) {
    if (c.state === "current") this.space.add(c.id, packTerms(c.content!, c.createdAt!, c.entity!));
    else this.space.remove(c.id);
  }
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

/** `memory`: the replica's search-memory budget, which counts every namespace's lists once built. */
export function pgKeywordLists(sql: SQL, followers: PgFollowers, memory?: SearchMemory): PgKeywordLists {
  const entries = new Map<string, Lists>();
  let closed = false;
  /** Lets a namespace's lists go (the budget released them, or they are built again): they follow nothing any more. */
  const release = (ns: string, e: Lists) => {
    if (entries.get(ns) !== e) return;
    entries.delete(ns);
    followers.detach(ns, e);
  };
  /** Counts the lists in the budget as they are now (which may release others'). */
  const held = (ns: string, e: Lists) => memory?.hold(ns, "keyword", e.space.heldBytes(), () => release(ns, e));

  /** Reads the namespace's current memories in slices, then follows what changed meanwhile. */
  const build = async (ns: string, e: Lists) => {
    // The epoch and the clock first: a memory changed after this is named by a later change,
    // which the catching up below re-reads.
    const from = await startingPoint(sql, ns);
    e.epoch = from.keywordEpoch;
    e.upto = from.upto;
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
    if (!(await followers.catchUp(ns, e))) throw new Error("another epoch");
    if (closed || entries.get(ns) !== e) return;
    e.ready = true;
    followers.attach(ns, e);
    held(ns, e);
  };

  const start = (ns: string) => {
    const e = new Lists();
    const old = entries.get(ns);
    if (old) followers.detach(ns, old);
    memory?.drop(ns, "keyword");
    entries.set(ns, e);
    build(ns, e).catch(() => {
      // Tried again on the namespace's next search (answered by SQL meanwhile).
      if (entries.get(ns) === e) entries.delete(ns);
    });
  };

  return {
    async get(ns) {
      if (closed) return undefined;
      memory?.searched(ns);
      const e = entries.get(ns);
      if (!e) {
        start(ns);
        return undefined;
      }
      if (!e.ready) return undefined;
      await followers.caughtUp(ns, "memories");
      if (entries.get(ns) !== e) return undefined;
      if (e.dropped) {
        // Another epoch, or too far behind for one search to wait for: built again.
        start(ns);
        return undefined;
      }
      held(ns, e);
      return e.space;
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
      for (const [ns, e] of entries) {
        followers.detach(ns, e);
        memory?.drop(ns, "keyword");
      }
      entries.clear();
    },
  };
}
