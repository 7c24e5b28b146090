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
import { KeywordSpace, packTerms, type SpaceParts } from "../../index/keyword";
import { ENTRY_BYTES, type SearchMemory } from "../search-memory";
import { type Change, type Copy, type PgFollowers, startingPoint } from "./follow";
import { pgSnapshots, type ReadSnapshot, readSnapshot, viewAs, writeSnapshot } from "./snapshots";

/**
 * What a packed space's lists (a namespace of at most a few hundred memories: the many small
 * tenants) cost the process for each byte they count: built from rows again at each return under
 * a binding budget, their small allocations sit among that build's garbage, and the heap's blocks
 * and the allocator's pages they keep stay partly empty. Measured on PostgreSQL (issue 32): the
 * process held ~1.3× what 15,000 such namespaces of 20 counted (stop 42: RssAnon +68-71 MiB for
 * 53 MiB counted), so a 64 MiB budget let the process grow past its base + 64.
 */
export const PACKED_COST = 1.3;

/** Sizes (tests make them small): memories read per slice of a build. */
export const keywordLists = { slice: 2000 };

/** What a keyword snapshot's row holds beside its sections (FrozenSpace's sizes and names). */
type KeywordHeader = Pick<SpaceParts, "count" | "postings" | "terms" | "entities" | "otherIds">;

/** The space a snapshot read from the database holds (its arrays view the parts read, not copied). */
function spaceOf(snap: ReadSnapshot<KeywordHeader>): KeywordSpace | undefined {
  const h = snap.header;
  const at = (i: number) => snap.sections[i] ?? new Uint8Array(0);
  const listN = viewAs(Int32Array, at(6));
  const docs = viewAs(Int32Array, at(8));
  const tfs = viewAs(Uint16Array, at(9));
  if (listN.length !== h.terms.length || docs.length !== h.postings || tfs.length !== h.postings) return undefined;
  const listDoc: Int32Array<ArrayBuffer>[] = [];
  const listTf: Uint16Array<ArrayBuffer>[] = [];
  let from = 0;
  for (const n of listN) {
    if (n < 0 || from + n > h.postings) return undefined;
    listDoc.push(docs.subarray(from, from + n));
    listTf.push(tfs.subarray(from, from + n));
    from += n;
  }
  const parts: SpaceParts = {
    ...h,
    idWords: viewAs(Int32Array, at(0)),
    docLen: viewAs(Int32Array, at(1)),
    docCreated: viewAs(Float64Array, at(2)),
    docEntity: viewAs(Int32Array, at(3)),
    docStart: viewAs(Int32Array, at(4)),
    pool: at(5),
    listN,
    listMaxLen: viewAs(Int32Array, at(7)),
    listDoc,
    listTf,
    table: viewAs(Int32Array, at(10)),
  };
  if (parts.idWords.length !== h.count * 4 || parts.docStart.length !== h.count + 1) return undefined;
  return KeywordSpace.fromParts(parts);
}

/** One namespace's lists, as its follower sees them. */
class Lists implements Copy {
  readonly wants = "memories";
  space = new KeywordSpace(undefined, true);
  upto = 0;
  epoch = 0;
  ready = false;
  dropped?: Copy["dropped"];
  /** Changes applied since its last snapshot (or its build), and whether one is being written. */
  changed = 0;
  saving = false;
  apply(c: Change) {
    this.changed++;
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
  /** Snapshots read from the database and written to it, since the start. */
  readonly snapshots: { read: number; written: number };
  /** Builds the namespace's lists now (from its snapshot when there is one), if it has none. */
  load(namespace: string): Promise<void>;
  /** An erasure deleted the namespace's snapshot: its lists are written again at its next search. */
  erased(namespace: string): void;
  /** Stops building (the store closes). */
  close(): void;
}

/**
 * `memory`: the replica's search-memory budget, which counts every namespace's lists once built.
 * `snapshotFrom`: lists of at least this many memories are written to the database once built
 * (snapshots.ts), and a first build reads the namespace's snapshot when there is one (0: neither).
 */
export function pgKeywordLists(
  sql: SQL,
  db: <T>(fn: () => Promise<T>) => Promise<T>,
  followers: PgFollowers,
  memory?: SearchMemory,
  snapshotFrom = 0,
): PgKeywordLists {
  const entries = new Map<string, Lists>();
  let closed = false;
  const stats = { read: 0, written: 0 };
  /**
   * The budget lets the namespace's lists go: they follow nothing any more. (It counts only the
   * lists held now: start() drops them from it before it builds others. One function for every
   * namespace, not a closure each: issue 32's small namespaces.)
   */
  const release = (ns: string) => {
    const e = entries.get(ns);
    if (!e) return;
    entries.delete(ns);
    followers.detach(ns, e);
  };
  /**
   * Counts the lists in the budget as they are now (a packed space at its cost to the process:
   * PACKED_COST), with their bookkeeping (this map's entry, the follower's, the budget's), which
   * may release others'.
   */
  const held = (ns: string, e: Lists) =>
    memory?.hold(
      ns,
      "keyword",
      Math.round(e.space.heldBytes() * (e.space.packed ? PACKED_COST : 1)) + ENTRY_BYTES,
      release,
    );

  /** Reads the namespace's current memories in slices, then follows what changed meanwhile. */
  const build = async (ns: string, e: Lists) => {
    // The epoch and the clock first: a memory changed after this is named by a later change,
    // which the catching up below re-reads.
    const from = await startingPoint(sql, ns);
    e.epoch = from.keywordEpoch;
    e.upto = from.upto;
    // Another replica's (or this one's before a restart) snapshot, caught up below from its time.
    const snap =
      snapshotFrom > 0 ? await readSnapshot<KeywordHeader>(db, sql, ns, "keyword", from.keywordEpoch) : undefined;
    const read = snap && spaceOf(snap);
    if (read) {
      e.space = read;
      e.upto = snap.upto;
      stats.read++;
    }
    let after = "00000000-0000-0000-0000-000000000000";
    for (;;) {
      if (read) break;
      if (closed || entries.get(ns) !== e) return;
      const rows = await sql`SELECT id, entity, content, created_at FROM memories
          WHERE namespace = ${ns} AND state = 'current' AND id > ${after}::uuid ORDER BY id LIMIT ${keywordLists.slice}`;
      if (rows.length === 0) break;
      for (const r of rows)
        e.space.add(r.id as string, packTerms(r.content as string, Number(r.created_at), r.entity as string), true);
      after = rows[rows.length - 1].id as string;
    }
    if (!read) e.space.trim();
    if (!(await followers.catchUp(ns, e))) throw new Error("another epoch");
    if (closed || entries.get(ns) !== e) return;
    e.ready = true;
    followers.attach(ns, e);
    held(ns, e);
    // (Built from its rows: their strings and the terms made of them are garbage now, about as
    // much again as the lists hold, collected with what the budget releases.)
    if (!read) memory?.transient(e.space.heldBytes());
    // Built from the rows: written for the other replicas (and the next start).
    e.changed = read ? e.changed : Number.POSITIVE_INFINITY;
    save(ns, e);
  };

  /**
   * Writes the lists to the database in the background when they are large enough and have
   * changed enough since they were read or last written (a reader's catching up is that long).
   */
  const save = (ns: string, e: Lists) => {
    const docs = e.space.stats.docs;
    if (snapshotFrom <= 0 || e.saving || docs < snapshotFrom || e.changed < docs * pgSnapshots.again) return;
    e.saving = true;
    e.changed = 0;
    // Frozen now: its documents as of `upto` (the follower applies a page and moves `upto` in one turn).
    const f = e.space.freeze();
    const at = { upto: e.upto, epoch: e.epoch };
    const header: KeywordHeader = {
      count: f.count,
      postings: f.postings,
      terms: f.terms,
      entities: f.entities,
      otherIds: f.otherIds,
    };
    writeSnapshot(sql, ns, "keyword", at, f.pieces(pgSnapshots.part), header, () => closed || entries.get(ns) !== e)
      .then((done) => {
        if (done) stats.written++;
      })
      .catch(() => undefined) // written again after more changes
      .finally(() => {
        f.release();
        e.saving = false;
      });
  };

  const start = (ns: string) => {
    const e = new Lists();
    const old = entries.get(ns);
    if (old) followers.detach(ns, old);
    memory?.drop(ns, "keyword");
    entries.set(ns, e);
    return build(ns, e).catch(() => {
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
      save(ns, e);
      // (A packed space's search makes its lists of that moment, garbage at its end.)
      if (e.space.packed) memory?.transient(e.space.heldBytes());
      return e.space;
    },
    isReady: (ns) => entries.get(ns)?.ready === true,
    snapshots: stats,
    async load(ns) {
      if (!closed && !entries.has(ns)) await start(ns);
    },
    erased(ns) {
      const e = entries.get(ns);
      if (e) e.changed = Number.POSITIVE_INFINITY;
    },
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
