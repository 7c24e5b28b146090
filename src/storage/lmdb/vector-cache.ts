// LMDB's in-memory vectors: one VectorSpace (../vector-space.ts) per namespace searched, built
// from the `vectors` sub-database on the namespace's first semantic search (in slices:
// touched.ts) and kept in step by the storage after each committed write that touched vectors
// (it re-reads those vectors from LMDB, so it follows the committed state whatever order commits
// land in). Beside the codes, a 4-bit copy of each vector (../four-bit.ts) ranks a search's
// candidates, and only the best few are read from LMDB and scored exactly (search.ts).
import { FourBit } from "../four-bit";
import { VectorSpace } from "../vector-space";
import type { Dbs } from "./layout";
import { loadSlice, NamespaceCache } from "./touched";

/** A stored vector's bytes as float32 (copied: the buffer may be reused by lmdb-js). */
const toFloats = (b: Uint8Array) => new Float32Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength));

/** The in-memory vectors of every namespace searched so far. */
export type VectorCache = NamespaceCache<VectorSpace, Float32Array>;

export function vectorCache(dbs: Dbs): VectorCache {
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
  return new NamespaceCache<VectorSpace, Float32Array>({
    empty: (ns) => new VectorSpace((id, entity) => bytes(ns, entity, id), new FourBit()),
    load: (s, ns, after, limit) =>
      loadSlice(dbs.vectors, ns, after, limit, (key, value) =>
        s.set(key[2] as string, key[1] as string, toFloats(value as Uint8Array)),
      ),
    keep: (s) => s.size > 0,
    read: ([ns, entity, id]) => read(ns, entity, id),
    drop: (s, [, entity, id]) => s.set(id, entity, undefined),
    put: (s, [, entity, id], v) => s.set(id, entity, v),
  });
}
