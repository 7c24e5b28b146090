// LMDB's in-memory vectors: one VectorSpace (src/index/vector/space.ts) per namespace searched, built
// from the `vectors` sub-database on the namespace's first semantic search (in slices:
// touched.ts) and kept in step by the storage after each committed write that touched vectors
// (it re-reads those vectors from LMDB, so it follows the committed state whatever order commits
// land in). Beside the codes, a 4-bit copy of each vector (src/index/vector/four-bit.ts) ranks a search's
// candidates, and only the best few are read from LMDB and scored exactly (search.ts).
// A first load reads the namespace in key order, which is by entity; so that the codes' mean and
// the cells' centres are not its first entities' alone (an entity's memories share topics), a
// namespace of at least `ann.cellsFrom` vectors is sampled first (its keys walked, a uniform
// sample of them kept, those vectors read) and the space primed with them (VectorSpace.prime).
import type { Key } from "lmdb";
import { ann, FourBit, VectorSpace, xorshift } from "../../index/vector";
import type { SearchMemory } from "../search-memory";
import { type Dbs, END } from "./layout";
import { loadSlice, NamespaceCache } from "./touched";

/** Whether first loads sample the namespace first (tests turn it off to compare). */
export const vectorLoading = { sample: true };

/** A vector's key: [namespace, entity, memory id]. */
type VectorKey = [string, string, string];

/**
 * A first load's progress: walking the keys (a reservoir sample of them), reading the sample's
 * vectors (their sum), then reading every vector (after `cursor`).
 */
type Loading = {
  phase: "keys" | "sample" | "all";
  cursor?: Key[];
  seen: number;
  sample: VectorKey[];
  next: number;
  sum?: Float64Array;
  summed: number;
  rand: () => number;
};

/** A stored vector's bytes as float32 (copied: the buffer may be reused by lmdb-js). */
const toFloats = (b: Uint8Array) => new Float32Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength));

/** The in-memory vectors of every namespace searched so far. */
export type VectorCache = NamespaceCache<VectorSpace, Float32Array>;

/** `memory`: the search-memory budget every namespace's vectors are counted in. */
export function vectorCache(dbs: Dbs, memory?: SearchMemory): VectorCache {
  /**
   * The stored bytes, without a copy: a plain view of lmdb-js's reused buffer (Uint8Array.set
   * refuses the Buffer getBinaryFast returns as it is).
   */
  const bytes = (ns: string, entity: string, id: string) => {
    const b = dbs.vectors.getBinaryFast([ns, entity, id] as unknown as string);
    return b && new Uint8Array(b.buffer, b.byteOffset, b.length);
  };
  const read = (ns: string, entity: string, id: string) => {
    const b = bytes(ns, entity, id);
    return b && toFloats(b);
  };
  const loads = new WeakMap<VectorSpace, Loading>();
  /** One slice of a first load (see Loading); the token returned means "more". */
  const load = (s: VectorSpace, ns: string, limit: number): Key[] | undefined => {
    let l = loads.get(s);
    if (!l) {
      l = {
        phase: vectorLoading.sample ? "keys" : "all",
        seen: 0,
        sample: [],
        next: 0,
        summed: 0,
        rand: xorshift(0x2545f491),
      };
      loads.set(s, l);
    }
    const size = ann.cellsFrom;
    if (l.phase === "keys") {
      // Keys only (the vectors' pages are not read): many per slice.
      let n = 0;
      const want = limit * 16;
      for (const key of dbs.vectors.getKeys({ start: l.cursor ?? [ns], end: [ns, END], limit: want + 1 })) {
        const k = key as Key[];
        if (l.cursor && n === 0 && k[1] === l.cursor[1] && k[2] === l.cursor[2]) continue;
        l.cursor = k;
        n++;
        l.seen++;
        if (l.sample.length < size) l.sample.push(k as VectorKey);
        else {
          const j = Math.floor(l.rand() * l.seen);
          if (j < size) l.sample[j] = k as VectorKey;
        }
        if (n === want) break;
      }
      if (n === want) return [ns];
      l.cursor = undefined;
      if (l.seen < size) {
        l.phase = "all";
        l.sample = [];
      } else {
        l.phase = "sample";
        // Read in key order (neighbouring pages).
        l.sample.sort((a, b) => (a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : a[2] < b[2] ? -1 : a[2] > b[2] ? 1 : 0));
      }
      return [ns];
    }
    if (l.phase === "sample") {
      for (const end = Math.min(l.sample.length, l.next + limit * 4); l.next < end; l.next++) {
        const [, entity, id] = l.sample[l.next];
        const v = read(ns, entity, id);
        if (!v) continue;
        l.sum ??= new Float64Array(v.length);
        if (v.length !== l.sum.length) continue;
        for (let j = 0; j < v.length; j++) l.sum[j] += v[j];
        l.summed++;
      }
      if (l.next < l.sample.length) return [ns];
      if (l.sum && l.summed > 0) {
        // The centres: sampled vectors in a deterministic random order.
        const order = l.sample.map((_, i) => i);
        for (let i = order.length - 1; i > 0; i--) {
          const j = Math.floor(l.rand() * (i + 1));
          [order[i], order[j]] = [order[j], order[i]];
        }
        const centres: Float32Array[] = [];
        for (const i of order) {
          if (centres.length >= ann.cells) break;
          const [, entity, id] = l.sample[i];
          const v = read(ns, entity, id);
          if (v?.length === l.sum.length) centres.push(v);
        }
        s.prime(
          l.sum.map((x) => x / l.summed),
          centres,
          l.seen,
        );
      }
      l.phase = "all";
      l.sample = [];
      return [ns];
    }
    l.cursor = loadSlice(dbs.vectors, ns, l.cursor, limit, (key, value) =>
      s.set(key[2] as string, key[1] as string, toFloats(value as Uint8Array)),
    );
    if (l.cursor === undefined) loads.delete(s);
    return l.cursor;
  };
  return new NamespaceCache<VectorSpace, Float32Array>(
    {
      empty: (ns) => new VectorSpace((id, entity) => bytes(ns, entity, id), new FourBit()),
      load: (s, ns, _after, limit) => load(s, ns, limit),
      keep: (s) => s.size > 0,
      bytes: (s) => s.heldBytes(),
      read: ([ns, entity, id]) => read(ns, entity, id),
      drop: (s, [, entity, id]) => s.set(id, entity, undefined),
      put: (s, [, entity, id], v) => s.set(id, entity, v),
    },
    memory,
    "vector",
  );
}
