// Vectors of a namespace held in memory as one float32 matrix (WebAssembly memory, scored by
// dot.ts), so a semantic search does not copy every stored vector out of LMDB. Built from LMDB
// on a namespace's first semantic search (in slices: touched.ts), and kept in step by the
// storage after each committed write that touched vectors (it re-reads those vectors from LMDB,
// so it follows the committed state whatever order commits land in). A row of a memory that is no longer current may linger
// until that refresh: search checks every candidate against its memory record anyway.
import { type DotKernel, dotKernel } from "./dot";
import type { Dbs } from "./index";
import { loadSlice, NamespaceCache } from "./touched";

const PAGE = 65536;
const align = (n: number) => Math.ceil(n / PAGE) * PAGE;
/** Most bytes one matrix may take (WebAssembly memory is at most 4 GiB). */
const MAX_BYTES = 3.5 * 1024 ** 3;

/** A vector the matrix cannot hold (another length, or the matrix is full): scored in JS. */
type Odd = { entity: string; v: Float32Array };

/** One namespace's vectors: matrix rows of `dims` floats, plus any of other lengths. */
export class Space {
  private kernel: DotKernel | undefined;
  private dims = 0;
  private capacity = 0;
  private base = 0; // byte offset of row 0; the query sits at 0
  rows = 0;
  readonly ids: string[] = [];
  private readonly entities: string[] = [];
  private readonly rowOf = new Map<string, number>();
  private readonly byEntity = new Map<string, Set<number>>();
  private readonly odd = new Map<string, Odd>();

  /** How many vectors it holds. */
  get size() {
    return this.rows + this.odd.size;
  }

  /** Sets (v given) or removes a memory's vector. */
  set(id: string, entity: string, v: Float32Array | undefined) {
    this.remove(id);
    if (v === undefined) return;
    if (this.rows === 0 && this.dims === 0 && v.length > 0 && v.length % 8 === 0) this.init(v.length);
    if (v.length !== this.dims || !this.reserve(this.rows + 1)) {
      this.odd.set(id, { entity, v: Float32Array.from(v) });
      return;
    }
    const r = this.rows++;
    this.matrix().set(v, r * this.dims);
    this.ids[r] = id;
    this.entities[r] = entity;
    this.rowOf.set(id, r);
    const rows = this.byEntity.get(entity) ?? new Set<number>();
    this.byEntity.set(entity, rows);
    rows.add(r);
  }

  private remove(id: string) {
    this.odd.delete(id);
    const r = this.rowOf.get(id);
    if (r === undefined) return;
    this.rowOf.delete(id);
    this.byEntity.get(this.entities[r])!.delete(r);
    if (this.byEntity.get(this.entities[r])!.size === 0) this.byEntity.delete(this.entities[r]);
    // The last row moves into the hole, so rows stay dense.
    const last = --this.rows;
    if (r !== last) {
      const m = this.matrix();
      m.copyWithin(r * this.dims, last * this.dims, (last + 1) * this.dims);
      const lastId = this.ids[last];
      this.ids[r] = lastId;
      this.entities[r] = this.entities[last];
      this.rowOf.set(lastId, r);
      const rows = this.byEntity.get(this.entities[r])!;
      rows.delete(last);
      rows.add(r);
    }
    this.ids.length = last;
    this.entities.length = last;
  }

  private init(dims: number) {
    this.dims = dims;
    this.kernel = dotKernel();
    this.base = align(dims * 4);
  }

  private matrix() {
    return new Float32Array(this.kernel!.memory.buffer, this.base, this.capacity * this.dims);
  }

  /** Room for `n` rows, and scratch for the scores and row list of a search over all of them. */
  private reserve(n: number): boolean {
    if (n <= this.capacity) return true;
    const capacity = Math.max(n, Math.min(this.capacity * 2 || 1024, this.capacity + 262144));
    const bytes = this.base + capacity * this.dims * 4 + capacity * 8;
    if (bytes > MAX_BYTES) return false;
    const have = this.kernel!.memory.buffer.byteLength;
    if (bytes > have) this.kernel!.memory.grow(Math.ceil((bytes - have) / PAGE));
    this.capacity = capacity;
    return true;
  }

  /** Similarity (dot product of normalised vectors) of every vector of the scope with `q`. */
  score(entity: string | undefined, q: Float32Array): { ids: string[]; sims: Float32Array } {
    const k = this.kernel;
    let ids: string[] = [];
    let sims = new Float32Array(0);
    if (k && q.length === this.dims && this.rows > 0) {
      const buf = k.memory.buffer;
      new Float32Array(buf, 0, this.dims).set(q);
      const out = this.base + this.capacity * this.dims * 4;
      const idx = out + this.capacity * 4;
      if (entity === undefined) {
        k.dense(this.base, 0, this.dims * 4, this.rows, out);
        ids = this.ids.slice(0, this.rows);
        sims = new Float32Array(buf, out, this.rows).slice();
      } else {
        const rows = this.byEntity.get(entity);
        if (rows?.size) {
          const list = new Int32Array(buf, idx, rows.size);
          let i = 0;
          for (const r of rows) {
            list[i++] = r;
            ids.push(this.ids[r]);
          }
          k.gather(this.base, 0, this.dims * 4, idx, rows.size, out);
          sims = new Float32Array(buf, out, rows.size).slice();
        }
      }
    }
    if (this.odd.size === 0) return { ids, sims };
    const extraIds: string[] = [];
    const extra: number[] = [];
    for (const [id, o] of this.odd) {
      if (o.v.length !== q.length || (entity !== undefined && o.entity !== entity)) continue;
      let dot = 0;
      for (let j = 0; j < q.length; j++) dot += o.v[j] * q[j];
      extraIds.push(id);
      extra.push(dot);
    }
    const all = new Float32Array(sims.length + extra.length);
    all.set(sims);
    all.set(extra, sims.length);
    return { ids: [...ids, ...extraIds], sims: all };
  }
}

/** A stored vector's bytes as float32 (copied: the buffer may be reused by lmdb-js). */
const toFloats = (b: Uint8Array) => new Float32Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength));

/** The in-memory vectors of every namespace searched so far. */
export type VectorCache = NamespaceCache<Space, Float32Array>;

export function vectorCache(dbs: Dbs): VectorCache {
  return new NamespaceCache<Space, Float32Array>({
    empty: () => new Space(),
    load: (s, ns, after, limit) =>
      loadSlice(dbs.vectors, ns, after, limit, (key, value) =>
        s.set(key[2] as string, key[1] as string, toFloats(value as Uint8Array)),
      ),
    keep: (s) => s.size > 0,
    read: (k) => {
      const b = dbs.vectors.get(k as unknown as string[]) as Uint8Array | undefined;
      return b && toFloats(b);
    },
    drop: (s, [, entity, id]) => s.set(id, entity, undefined),
    put: (s, [, entity, id], v) => s.set(id, entity, v),
  });
}
