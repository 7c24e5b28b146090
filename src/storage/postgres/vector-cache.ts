// PostgreSQL's in-memory vectors: per replica and namespace, the design of LMDB's
// (../vector-space.ts: one bit per dimension around the namespace's mean, cells, Hamming ranking
// in WebAssembly), plus a 4-bit copy of each vector for the rescoring (PostgreSQL cannot be read
// 800 times per search): 96 + 384 bytes at 768 dimensions instead of 3,072. The search reads the
// exact vectors of its final candidates only, with their memory rows, so every score answered is
// the exact cosine of a current memory (search.ts).
//
// Built on a namespace's first semantic search, in the background and in slices; until then the
// exact path (every vector of the scope read) answers. Kept in step before each search by one
// small statement: the namespace's changes since the clock time it last followed. apply's vector
// changes come with events, and a namespace's events commit in the order of their times (writers
// hold the namespace_clock row until they commit, schema.ts); the embedding worker's come without
// an event, so it takes a stamp from the same clock and writes it on the vector row
// (embeddings.ts). Everything committed up to the clock's value, read in the same snapshot, is
// seen; nothing after it is skipped. A rebuild of the vectors bumps search_state.vector_epoch,
// and a replica that sees a new epoch drops every copy.
import type { SQL } from "bun";
import { FourBit } from "../four-bit";
import { VectorSpace } from "../vector-space";

type Row = Record<string, unknown>;

/** Sizes (tests make them small). */
export const pgVectors = {
  /**
   * A scope of at most this many vectors is searched by reading them all: as fast there (768
   * dimensions, same run: 1.6 against 1.5 ms at 100 vectors; 4.1 against 2.4 ms at 200).
   */
  exactBelow: 100,
  /**
   * Statements at once that read a search's final candidates, each on a connection of its own.
   * 4 measured 0.88× the p50 of 1 with the rows on disk (bench/notes.md), for 4× the connections
   * per search: not taken by default.
   */
  readParallel: 1,
  /** Vectors read per slice of a first load. */
  slice: 2000,
  /** Changed memories read per statement when following (with their vectors). */
  followPage: 5000,
  /** Most pages a search waits for; a copy further behind is dropped and built again. */
  followPages: 10,
  /** What runs between slices (tests make it wait). */
  between: (): Promise<unknown> => new Promise((resolve) => setImmediate(resolve)),
};

/** One namespace's copy: its codes and 4-bit vectors, and the clock time they follow. */
interface Copy {
  space: VectorSpace;
  /** The namespace clock's value this copy holds every change up to. */
  upto: number;
  epoch: number;
  /** The follow under way, and the one queued behind it (its statement not sent yet). */
  running?: Promise<void>;
  queued?: Promise<void>;
}

const asFloats = (b: Uint8Array) => new Float32Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength));

/**
 * Every namespace's copy on this replica. `ready` answers a namespace's copy brought up to date
 * with every change committed before it was called, or undefined while it is not built (the first
 * call starts building it).
 */
export class PgVectorCache {
  private readonly copies = new Map<string, Copy>();
  private readonly loads = new Map<string, Promise<void>>();
  private epoch = -1;
  private closed = false;

  constructor(
    private readonly sql: SQL,
    private readonly db: <T>(fn: () => Promise<T>) => Promise<T>,
  ) {}

  /** The namespace's copy, up to date; undefined when there is none yet (one is then built in the background). */
  async ready(namespace: string): Promise<VectorSpace | undefined> {
    const c = this.copies.get(namespace);
    if (!c) {
      if (!this.loads.has(namespace) && !this.closed) {
        const load = this.load(namespace)
          .catch(() => undefined) // the next search tries again
          .finally(() => this.loads.delete(namespace));
        this.loads.set(namespace, load);
      }
      return undefined;
    }
    await this.follow(c, namespace);
    if (this.copies.get(namespace) === c) return c.space;
    // Dropped by the follow (another epoch, or too far behind): built again.
    return this.ready(namespace);
  }

  /** Namespaces whose copy is built, and the vectors in them. */
  stats(): { namespaces: number; vectors: number } {
    let vectors = 0;
    for (const c of this.copies.values()) vectors += c.space.size;
    return { namespaces: this.copies.size, vectors };
  }

  /** Stops the builds under way (the store closes). */
  close() {
    this.closed = true;
    this.copies.clear();
  }

  /** Forgets every copy (after a rebuild of the vectors by this process). */
  clear() {
    this.copies.clear();
  }

  /** Whether a load is under way (tests). */
  loading(namespace: string): Promise<void> | undefined {
    return this.loads.get(namespace);
  }

  /**
   * Reads every vector of the namespace in slices (each its own statement), from a clock time
   * read first: whatever commits meanwhile is followed afterwards from that time.
   */
  private async load(namespace: string) {
    const [start] = await this.db(
      () => this.sql`SELECT (SELECT last_ms FROM namespace_clock WHERE namespace = ${namespace}) AS upto,
                       (SELECT vector_epoch FROM search_state WHERE id = 1) AS epoch`,
    );
    const epoch = Number(start.epoch);
    const keeper = new FourBit();
    const space = new VectorSpace((_id, _entity, row) => keeper.read(row), keeper);
    let after = "00000000-0000-0000-0000-000000000000";
    for (;;) {
      const rows = await this.db(
        () => this.sql`SELECT memory_id, entity, vector FROM memory_vectors
            WHERE namespace = ${namespace} AND memory_id > ${after} ORDER BY memory_id LIMIT ${pgVectors.slice}`,
      );
      for (const r of rows) space.set(r.memory_id as string, r.entity as string, asFloats(r.vector as Uint8Array));
      if (rows.length < pgVectors.slice) break;
      after = rows.at(-1).memory_id as string;
      await pgVectors.between();
      if (this.closed) return;
    }
    const copy: Copy = { space, upto: start.upto === null ? 0 : Number(start.upto), epoch };
    // What committed meanwhile, page by page, before searches use it (they take the old path
    // until then, however long the catching up).
    for (;;) {
      const r = await this.page(copy, namespace);
      if (r === "stale") return;
      if (r === "done") break;
      await pgVectors.between();
    }
    if (this.closed) return;
    if (epoch !== this.epoch) {
      if (epoch < this.epoch) return;
      this.copies.clear();
      this.epoch = epoch;
    }
    this.copies.set(namespace, copy);
  }

  /**
   * Brings the copy up to date with every change committed before the call: a follow already
   * under way may have read before that, so the caller waits for the next one (shared by every
   * caller that arrives before it is sent). A copy more than `followPages` pages behind, or of
   * another epoch, is dropped.
   */
  private follow(c: Copy, namespace: string): Promise<void> {
    if (c.queued) return c.queued;
    const start = () => {
      c.queued = undefined;
      const p = this.catchUp(c, namespace).finally(() => {
        if (c.running === p) c.running = undefined;
      });
      c.running = p;
      return p;
    };
    if (!c.running) return start();
    c.queued = c.running.catch(() => undefined).then(start);
    return c.queued;
  }

  private async catchUp(c: Copy, namespace: string) {
    for (let pages = 0; this.copies.get(namespace) === c; pages++) {
      if (pages >= pgVectors.followPages) {
        // Too far behind for a search to wait for: built again (the old path answers meanwhile).
        this.copies.delete(namespace);
        return;
      }
      const r = await this.page(c, namespace);
      if (r === "done") return;
      if (r === "stale") {
        // The vectors were rebuilt: every copy is dropped, and built again on its next search.
        this.copies.clear();
        return;
      }
    }
  }

  /**
   * One statement, one snapshot: the namespace's clock, the epoch, and, oldest first, up to
   * `followPage` memories named by an event after `c.upto` or whose vector carries a stamp after
   * it, each with its vector now (none: gone). Each source is read in time order by its index and
   * cut at the page's size, and each vector by its key, so a page costs its own size however far
   * behind the copy is. When the page is full, the changes at its last
   * time are left for the next page (a stamp is shared by a batch's vectors, so a page may end
   * inside one), and `c.upto` moves to just before it; otherwise to the clock's value.
   */
  private async page(c: Copy, namespace: string, size = pgVectors.followPage): Promise<"done" | "more" | "stale"> {
    const rows = await this.db(
      () => this.sql`
        WITH changed AS (
          SELECT t, id FROM (
            SELECT t, unnest(ARRAY[a, b]) AS id FROM (
              (SELECT at_ms AS t, memory_id AS a, merged_from_id AS b FROM events
               WHERE namespace = ${namespace} AND at_ms > ${c.upto} ORDER BY at_ms LIMIT ${size})
              UNION ALL
              (SELECT stamp, memory_id, NULL FROM memory_vectors
               WHERE namespace = ${namespace} AND stamp > ${c.upto} ORDER BY stamp LIMIT ${size})) AS e) AS u
          WHERE id IS NOT NULL ORDER BY t LIMIT ${size})
        SELECT now.upto, now.epoch, changed.t, changed.id, v.entity, v.vector
        FROM (SELECT (SELECT last_ms FROM namespace_clock WHERE namespace = ${namespace}) AS upto,
                     (SELECT vector_epoch FROM search_state WHERE id = 1) AS epoch) AS now
        LEFT JOIN (changed LEFT JOIN LATERAL (
            SELECT entity, vector FROM memory_vectors WHERE memory_id = changed.id AND namespace = ${namespace} LIMIT 1) AS v
          ON true) ON changed.id IS NOT NULL
        ORDER BY changed.t`,
    );
    if (Number(rows[0].epoch) !== c.epoch) {
      this.epoch = Math.max(this.epoch, Number(rows[0].epoch));
      return "stale";
    }
    const changes = rows.filter((r: Row) => r.id !== null);
    let until = Number.POSITIVE_INFINITY;
    if (changes.length >= size) {
      until = Number(changes.at(-1).t);
      // One time fills the page (a batch's stamp): read it whole with a larger page.
      if (Number(changes[0].t) === until) return this.page(c, namespace, size * 4);
    }
    for (const r of changes) {
      if (Number(r.t) >= until) break;
      c.space.set(
        r.id as string,
        (r.entity as string) ?? "",
        r.vector === null ? undefined : asFloats(r.vector as Uint8Array),
      );
    }
    if (until !== Number.POSITIVE_INFINITY) {
      c.upto = until - 1;
      return "more";
    }
    if (rows[0].upto !== null) c.upto = Math.max(c.upto, Number(rows[0].upto));
    return "done";
  }
}
