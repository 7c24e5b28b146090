// PostgreSQL's in-memory vectors: per replica and namespace, the design of LMDB's
// (src/index/vector/space.ts: one bit per dimension around the namespace's mean, cells, Hamming ranking
// in WebAssembly), plus a 4-bit copy of each vector for the rescoring (PostgreSQL cannot be read
// 800 times per search): 96 + 384 bytes at 768 dimensions instead of 3,072. The search reads the
// exact vectors of its final candidates only, with their memory rows, so every score answered is
// the exact cosine of a current memory (search.ts).
//
// Built on a namespace's first semantic search, in the background and in slices; until then the
// exact path (every vector of the scope read) answers. Kept in step by the namespace's follower
// (follow.ts), which reads its changes before each search, once for the vectors and the keyword
// lists alike: apply's vector changes come with events, the embedding worker's with a stamp from
// the namespace's clock. A rebuild of the vectors bumps search_state.vector_epoch, and a replica
// that sees a new epoch drops every copy.
import type { SQL } from "bun";
import { FourBit, type VectorHeader, VectorSpace } from "../../index/vector";
import { ENTRY_BYTES, type SearchMemory } from "../search-memory";
import { type Change, type Copy, type PgFollowers, startingPoint } from "./follow";
import { pgSnapshots, readSnapshot, writeSnapshot } from "./snapshots";

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
  /**
   * A semantic search runs on the copy as it is and checks its freshness in its first statement
   * (search.ts approximateSearch), instead of a follow statement before it (benches turn it off
   * to compare).
   */
  checkAtRead: true,
  /** Vectors read per slice of a first load. */
  slice: 2000,
  /** What runs between slices (tests make it wait). */
  between: (): Promise<unknown> => new Promise((resolve) => setImmediate(resolve)),
};

/** One namespace's copy: its codes and 4-bit vectors, as its follower sees them. */
class Vectors implements Copy {
  readonly wants = "vectors";
  dropped?: Copy["dropped"];
  /** Changes applied since its last snapshot (or since it was read), and whether one is being written. */
  changed = 0;
  saving = false;
  /** Changes applied since it was made. */
  applied = 0;
  constructor(
    readonly space: VectorSpace,
    public upto: number,
    readonly epoch: number,
  ) {}
  apply(c: Change) {
    this.changed++;
    this.applied++;
    this.space.set(c.id, c.vectorEntity ?? "", c.vector === null ? undefined : asFloats(c.vector));
  }
}

const asFloats = (b: Uint8Array) => new Float32Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength));

/**
 * A namespace's copy as it is, not caught up: the clock time it holds every change up to, the
 * vectors' epoch it was built under, and a count of the changes applied to it (search.ts checks
 * them against the database).
 */
export interface UnfollowedCopy {
  space: VectorSpace;
  upto(): number;
  readonly epoch: number;
  applied(): number;
}

/**
 * Every namespace's copy on this replica. `ready` answers a namespace's copy brought up to date
 * with every change committed before it was called, or undefined while it is not built (the first
 * call starts building it).
 */
export class PgVectorCache {
  private readonly copies = new Map<string, Vectors>();
  private readonly loads = new Map<string, Promise<void>>();
  private epoch = -1;
  private closed = false;

  /** Snapshots read from the database, written to it, and refused or called off, since the start. */
  readonly snapshots = { read: 0, written: 0, refused: 0 };

  /**
   * `memory`: the replica's search-memory budget, which counts every namespace's copy once built.
   * `snapshotFrom`: copies of at least this many vectors are written to the database once built
   * (snapshots.ts), and a first load reads the namespace's snapshot when there is one (0: neither).
   */
  constructor(
    private readonly sql: SQL,
    private readonly db: <T>(fn: () => Promise<T>) => Promise<T>,
    private readonly followers: PgFollowers,
    private readonly memory?: SearchMemory,
    private readonly snapshotFrom = 0,
  ) {}

  /** Counts the copy in the budget as it is now, with its bookkeeping (which may release others'). */
  private held(namespace: string, c: Vectors) {
    this.memory?.hold(namespace, "vector", c.space.heldBytes() + ENTRY_BYTES, () => {
      if (this.copies.get(namespace) !== c) return;
      this.followers.detach(namespace, c);
      this.copies.delete(namespace);
    });
  }

  /** The namespace's copy, up to date; undefined when there is none yet (one is then built in the background). */
  async ready(namespace: string): Promise<VectorSpace | undefined> {
    this.memory?.searched(namespace);
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
    await this.followers.caughtUp(namespace, "vectors");
    if (c.dropped) this.dropped(namespace, c);
    if (this.copies.get(namespace) === c) {
      this.held(namespace, c);
      this.save(namespace, c);
      return c.space;
    }
    // Dropped (another epoch, or too far behind): built again.
    return this.ready(namespace);
  }

  /**
   * The namespace's copy as it is now, without catching it up (undefined when there is none:
   * see ready); a search that uses it checks that nothing changed since (UnfollowedCopy).
   */
  current(namespace: string): UnfollowedCopy | undefined {
    const c = this.copies.get(namespace);
    // (A follow queued by the other half of a hybrid search: joined, one statement for both.)
    if (!c || c.dropped || this.followers.queued(namespace)) return undefined;
    this.memory?.searched(namespace);
    return { space: c.space, upto: () => c.upto, epoch: c.epoch, applied: () => c.applied };
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
    this.clear();
  }

  /** Forgets every copy (after a rebuild of the vectors by this process). */
  clear() {
    for (const [ns, c] of this.copies) {
      this.followers.detach(ns, c);
      this.memory?.drop(ns, "vector");
    }
    this.copies.clear();
  }

  /** Loads the namespace's copy now (from its snapshot when there is one), if it has none. */
  async preload(namespace: string) {
    if (this.copies.has(namespace) || this.closed) return;
    await this.ready(namespace);
    await this.loads.get(namespace);
  }

  /** An erasure deleted the namespace's snapshot: its copy is written again at its next search. */
  erased(namespace: string) {
    const c = this.copies.get(namespace);
    if (c) c.changed = Number.POSITIVE_INFINITY;
  }

  /**
   * Writes the copy to the database in the background when it is large enough and has changed
   * enough since it was read or last written (a reader's catching up is that long). Its arrays
   * are copied first (the follower changes it right after): a transient copy of its size.
   */
  private save(namespace: string, c: Vectors) {
    const size = c.space.size;
    if (this.snapshotFrom <= 0 || c.saving || size < this.snapshotFrom || c.changed < size * pgSnapshots.again) return;
    const f = c.space.freeze();
    if (!f) return;
    c.saving = true;
    c.changed = 0;
    const at = { upto: c.upto, epoch: c.epoch };
    const pieces = f.sections.map((b, i) => [i, b] as [number, ArrayBufferView]);
    writeSnapshot(
      this.sql,
      namespace,
      "vector",
      at,
      pieces,
      { ...f.header },
      () => this.closed || this.copies.get(namespace) !== c,
    )
      .then((done) => {
        if (done) this.snapshots.written++;
        else this.snapshots.refused++;
      })
      .catch(() => undefined) // written again after more changes
      .finally(() => {
        c.saving = false;
      });
  }

  /** Whether a load is under way (tests). */
  loading(namespace: string): Promise<void> | undefined {
    return this.loads.get(namespace);
  }

  /** A copy its follower dropped: the vectors were rebuilt (every copy goes), or it is too far behind. */
  private dropped(namespace: string, c: Vectors) {
    if (c.dropped?.why === "epoch" && c.dropped.epoch > this.epoch) {
      this.epoch = c.dropped.epoch;
      this.clear();
    } else if (this.copies.get(namespace) === c) {
      this.followers.detach(namespace, c);
      this.copies.delete(namespace);
      this.memory?.drop(namespace, "vector");
    }
  }

  /**
   * Reads every vector of the namespace in slices (each its own statement), from a clock time
   * read first: whatever commits meanwhile is followed afterwards from that time.
   */
  private async load(namespace: string) {
    const start = await this.db(() => startingPoint(this.sql, namespace));
    let keeper = new FourBit();
    let space = new VectorSpace((_id, _entity, row) => keeper.read(row), keeper);
    // Another replica's (or this one's before a restart) snapshot, caught up below from its time.
    const snap =
      this.snapshotFrom > 0
        ? await readSnapshot<VectorHeader>(this.db, this.sql, namespace, "vector", start.vectorEpoch)
        : undefined;
    let fromSnapshot = false;
    if (snap) {
      const k = new FourBit();
      const read = VectorSpace.thaw(snap.header, snap.sections, (_id, _entity, row) => k.read(row), k);
      if (read) {
        // (Its blocks copied out of the snapshot's buffer, which then goes: it holds every section.)
        k.own();
        keeper = k;
        space = read;
        start.upto = snap.upto;
        fromSnapshot = true;
        this.snapshots.read++;
      }
    }
    let after = "00000000-0000-0000-0000-000000000000";
    for (;;) {
      if (fromSnapshot) break;
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
    const copy = new Vectors(space, start.upto, start.vectorEpoch);
    // What committed meanwhile, page by page, before searches use it (they take the old path
    // until then, however long the catching up).
    if (!(await this.followers.catchUp(namespace, copy, pgVectors.between))) {
      this.epoch = Math.max(this.epoch, copy.dropped!.epoch);
      return;
    }
    if (this.closed) return;
    if (copy.epoch !== this.epoch) {
      if (copy.epoch < this.epoch) return;
      this.clear();
      this.epoch = copy.epoch;
    }
    this.copies.set(namespace, copy);
    this.followers.attach(namespace, copy);
    this.held(namespace, copy);
    // Built from the rows: written for the other replicas (and the next start).
    if (!fromSnapshot) copy.changed = Number.POSITIVE_INFINITY;
    this.save(namespace, copy);
  }
}
