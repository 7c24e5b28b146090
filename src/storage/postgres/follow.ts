// Following a namespace's changes on this replica (issue 26): the in-memory copies of a namespace
// (its keyword lists, keyword-cache.ts; its vectors, vector-cache.ts) are kept in step by one
// follower per namespace, which reads the changes once per search for the copies the search
// uses (a keyword search leaves the vectors where they are: they catch up when next searched). A
// hybrid search waits for one statement, not one per copy.
//
// Why following is exact: per namespace, event times (at_ms) are handed out under the
// namespace_clock row lock, held to the end of the write transaction (schema.ts), so they commit
// in time order, and the clock's value read in a statement's snapshot is the time of the last
// change that snapshot holds; the embedding worker's vectors come without an event, so it takes a
// stamp from the same clock and writes it on the vector row (embeddings.ts). A copy that has seen
// every change up to a clock time can never see one at or before it later. Before each search one
// statement reads, in one snapshot, the clock, the epochs, and the memories named by an event
// (memory_id and merged_from_id) or a stamp after the time followed, each as it is now: its
// memory row for keyword lists, its vector for vectors. What changes memories without events in
// time order bumps an epoch in its transaction (an import: search_epochs, per namespace, read by
// keyword lists; a rebuild of the vectors: search_state.vector_epoch, read by vectors), and a
// copy that sees another epoch than its own is dropped and built again.
import type { SQL } from "bun";

type Row = Record<string, unknown>;

/** Sizes (tests make them small). */
export const pgFollow = {
  /** Changes read per statement. */
  page: 5000,
  /** Most pages a search waits for; copies further behind are dropped and built again. */
  pages: 20,
};

/** One changed memory, as it is now. */
export interface Change {
  id: string;
  /** Its newest change time in the page. */
  t: number;
  /** Named by an event (else only by the embedding worker's stamp: its vector changed, not its row). */
  event: boolean;
  /** Its memory row (copies that want "memories"): null when there is none in the namespace. */
  state: string | null;
  entity: string | null;
  content: string | null;
  createdAt: number | null;
  /** Its vector (copies that want "vectors"): null when it has none. */
  vectorEntity: string | null;
  vector: Uint8Array | null;
}

/** Why a copy was dropped by its follower. */
export type Dropped = "epoch" | "behind";

/** An in-memory copy of a namespace that follows its changes. */
export interface Copy {
  /** What it reads of each changed memory: its row (keyword lists) or its vector (vectors). */
  readonly wants: "memories" | "vectors";
  /** The epoch it was built under: search_epochs' for memories, search_state.vector_epoch for vectors. */
  readonly epoch: number;
  /** The clock time it holds every change up to (moved by its follower). */
  upto: number;
  /** Set when its follower drops it (another epoch, with the epoch seen; or too far behind). */
  dropped?: { why: Dropped; epoch: number };
  /** Applies one change (a memory named by an event, for copies of memories). */
  apply(c: Change): void;
}

/** The clock time and epochs a copy starts from: read before its first slice. */
export async function startingPoint(
  sql: SQL,
  namespace: string,
): Promise<{ upto: number; keywordEpoch: number; vectorEpoch: number }> {
  const [r] =
    await sql`SELECT COALESCE((SELECT last_ms FROM namespace_clock WHERE namespace = ${namespace}), 0) AS upto,
      COALESCE((SELECT epoch FROM search_epochs WHERE namespace = ${namespace}), 0) AS keyword_epoch,
      (SELECT vector_epoch FROM search_state WHERE id = 1) AS vector_epoch`;
  return { upto: Number(r.upto), keywordEpoch: Number(r.keyword_epoch), vectorEpoch: Number(r.vector_epoch) };
}

/** One namespace's follower: the copies it keeps in step, the statement under way and the one queued. */
interface Follower {
  /** (An array, not a Set: one or two copies, and a follower for every namespace held.) */
  copies: Copy[];
  running?: Promise<void>;
  /** The next follow, its statement not sent yet: callers arriving now share it... */
  queued?: Promise<void>;
  /**
   * ...and the kinds of copy they want in step (a keyword search does not wait for the vectors);
   * none between follows (a follower is kept for every namespace held: issue 32).
   */
  wanted?: Set<Copy["wants"]>;
}

export interface PgFollowers {
  /** Keeps `copy` in step with `namespace` from now on (from its own `upto`). */
  attach(namespace: string, copy: Copy): void;
  detach(namespace: string, copy: Copy): void;
  /**
   * Every change committed before this call applied to every copy of the namespace that wants
   * `wants` (one statement per page for them and for those of the callers sharing it: both
   * halves of a hybrid search). A copy of another epoch, or more than `pgFollow.pages` behind, is
   * detached with `dropped` set. Copies not asked for stay where they are, and catch up from
   * there when asked.
   */
  caughtUp(namespace: string, wants: Copy["wants"]): Promise<void>;
  /**
   * Whether a follow of the namespace is queued, its statement not sent yet: a caller of
   * caughtUp now shares it (a semantic search beside a keyword search then catches its vectors
   * up in the same statement instead of checking them at its read: search.ts).
   */
  queued(namespace: string): boolean;
  /**
   * Pages `copy` alone (not attached) up to the changes committed before this call, however
   * many pages, `between` run between pages; false if it was dropped (another epoch).
   */
  catchUp(namespace: string, copy: Copy, between?: () => Promise<unknown>): Promise<boolean>;
  /** Follow statements sent, since the start (tests and benches). */
  readonly statements: number;
}

export function pgFollowers(sql: SQL, db: <T>(fn: () => Promise<T>) => Promise<T>): PgFollowers {
  const followers = new Map<string, Follower>();
  let statements = 0;

  const drop = (ns: string, c: Copy, why: Dropped, epoch: number) => {
    c.dropped = { why, epoch };
    const f = followers.get(ns);
    if (f) remove(f.copies, c);
  };

  /**
   * One statement, one snapshot: the namespace's clock, the epochs, and, oldest first, up to
   * `size` events after the oldest `upto` of `copies` (each naming its memory and the one it
   * merged away) and, when a copy wants vectors, up to `size` of the worker's stamps, each memory
   * as it is now. Each source is read in time order by its index and cut at the page's size, so a
   * page costs its own size however far behind a copy is. When a source fills its page, the
   * changes at or after its last time are left for the next page (a stamp is shared by a batch's
   * vectors, so a page may end inside one), and each copy moves to just before it; otherwise to
   * the clock's value. (The statement is planned at each run, its costs depending on the time
   * followed: it is kept to few joins, which is most of its time when nothing changed.)
   */
  const page = async (ns: string, copies: Copy[], size = pgFollow.page): Promise<"done" | "more"> => {
    const from = Math.min(...copies.map((c) => c.upto));
    const memories = copies.some((c) => c.wants === "memories");
    const vectors = copies.some((c) => c.wants === "vectors");
    statements++;
    // An event is two rows (its memory, the one it merged away or NULL): 2 × size rows. Only the
    // parts some copy wants: fewer joins to plan.
    const rows: Row[] = await db(() =>
      sql.unsafe(
        `SELECT (SELECT last_ms FROM namespace_clock WHERE namespace = $1) AS upto,
                (SELECT epoch FROM search_epochs WHERE namespace = $1) AS keyword_epoch,
                (SELECT vector_epoch FROM search_state WHERE id = 1) AS vector_epoch, c.t, c.id, c.ev
                ${memories ? ", m.state, m.entity, m.content, m.created_at" : ""}
                ${vectors ? ", v.entity AS vector_entity, v.vector" : ""}
         FROM (SELECT 1) AS one LEFT JOIN (
           (SELECT at_ms AS t, unnest(ARRAY[memory_id, merged_from_id]) AS id, true AS ev FROM events
            WHERE namespace = $1 AND at_ms > $2 ORDER BY at_ms LIMIT $3)
           ${
             vectors
               ? `UNION ALL (SELECT stamp, memory_id, false FROM memory_vectors
                  WHERE namespace = $1 AND stamp > $2 ORDER BY stamp LIMIT $4)`
               : ""
           }) AS c ON true
         ${memories ? "LEFT JOIN memories m ON c.ev AND m.id = c.id AND m.namespace = $1" : ""}
         ${vectors ? "LEFT JOIN memory_vectors v ON v.memory_id = c.id AND v.namespace = $1" : ""}`,
        vectors ? [ns, from, 2 * size, size] : [ns, from, 2 * size],
      ),
    );
    const head = rows[0];
    const live = copies.filter((c) => {
      const epoch = Number(c.wants === "memories" ? (head.keyword_epoch ?? 0) : head.vector_epoch);
      if (epoch === c.epoch) return true;
      drop(ns, c, "epoch", epoch);
      return false;
    });
    if (live.length === 0) return "done";
    // Each source's rows and times: one that filled its page is cut at its last time.
    const n = [0, 0];
    const first = [Number.POSITIVE_INFINITY, Number.POSITIVE_INFINITY];
    const last = [0, 0];
    for (const r of rows) {
      if (r.t === null) continue;
      const k = r.ev ? 0 : 1;
      const t = Number(r.t);
      n[k]++;
      first[k] = Math.min(first[k], t);
      last[k] = Math.max(last[k], t);
    }
    let until = Number.POSITIVE_INFINITY;
    if (n[0] >= 2 * size) until = last[0];
    if (n[1] >= size) {
      // One stamp fills the page (a batch's): read it whole with a larger page.
      if (first[1] === last[1]) return page(ns, live, size * 4);
      until = Math.min(until, last[1]);
    }
    // Each memory once, as it is now, at the newest time it was named in the page.
    const changes = new Map<string, Change>();
    for (const r of rows) {
      if (r.id === null) continue;
      const t = Number(r.t);
      if (t >= until) continue;
      const seen = changes.get(r.id as string);
      if (seen && !r.ev) {
        seen.t = Math.max(seen.t, t);
        continue;
      }
      changes.set(r.id as string, {
        id: r.id as string,
        t: Math.max(t, seen?.t ?? 0),
        event: (r.ev as boolean) || seen?.event === true,
        state: (r.state ?? null) as string | null,
        entity: (r.entity ?? null) as string | null,
        content: (r.content ?? null) as string | null,
        createdAt: r.created_at == null ? null : Number(r.created_at),
        vectorEntity: (r.vector_entity ?? null) as string | null,
        vector: (r.vector ?? null) as Uint8Array | null,
      });
    }
    for (const change of changes.values())
      for (const c of live) if (change.t > c.upto && (c.wants === "vectors" || change.event)) c.apply(change);
    const to = until !== Number.POSITIVE_INFINITY ? until - 1 : head.upto === null ? from : Number(head.upto);
    for (const c of live) c.upto = Math.max(c.upto, to);
    return until === Number.POSITIVE_INFINITY ? "done" : "more";
  };

  /** Pages until done for every copy of the follower that wants `kinds`, at most `pgFollow.pages`. */
  const run = async (ns: string, f: Follower, kinds: Set<Copy["wants"]>) => {
    for (let n = 0; ; n++) {
      const copies = f.copies.filter((c) => kinds.has(c.wants));
      if (copies.length === 0) return;
      if (n >= pgFollow.pages) {
        // Too far behind for a search to wait for: built again (answered without them meanwhile).
        for (const c of copies) drop(ns, c, "behind", c.epoch);
        return;
      }
      if ((await page(ns, copies)) === "done") return;
    }
  };

  return {
    attach(ns, copy) {
      let f = followers.get(ns);
      if (!f) {
        f = { copies: [] };
        followers.set(ns, f);
      }
      if (!f.copies.includes(copy)) f.copies.push(copy);
    },

    detach(ns, copy) {
      const f = followers.get(ns);
      if (!f) return;
      remove(f.copies, copy);
      // (A namespace no copy follows any more, and none follows now, is forgotten: many
      // namespaces come and go under the search-memory budget.)
      if (f.copies.length === 0 && !f.queued && !f.running) followers.delete(ns);
    },

    caughtUp(ns, wants) {
      const f = followers.get(ns);
      if (!f || f.copies.length === 0) return Promise.resolve();
      f.wanted ??= new Set();
      f.wanted.add(wants);
      if (f.queued) return f.queued;
      const start = () => {
        f.queued = undefined;
        const kinds = f.wanted ?? new Set<Copy["wants"]>();
        f.wanted = undefined;
        const p = run(ns, f, kinds).finally(() => {
          if (f.running === p) f.running = undefined;
        });
        f.running = p;
        return p;
      };
      // Sent after the running follow (which may have read before this call), or at the next turn
      // of the event loop: the searches that call meanwhile (both halves of a hybrid search) share it.
      f.queued = (f.running ? f.running.catch(() => undefined) : new Promise((r) => setImmediate(r))).then(start);
      return f.queued;
    },

    queued(ns) {
      return followers.get(ns)?.queued !== undefined;
    },

    async catchUp(ns, copy, between) {
      for (;;) {
        const r = await page(ns, [copy]);
        if (copy.dropped) return false;
        if (r === "done") return true;
        await between?.();
      }
    },

    get statements() {
      return statements;
    },
  };
}

/** Takes `c` out of `copies` (if there). */
function remove(copies: Copy[], c: Copy) {
  const i = copies.indexOf(c);
  if (i >= 0) copies.splice(i, 1);
}
