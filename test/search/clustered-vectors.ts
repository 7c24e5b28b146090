// Test vectors for the vector index tests (vector-index.test.ts, vector-index-postgres.test.ts):
// seeded, clustered like embeddings are, so recall over them means something.
import type { MemoryOp } from "../../src/storage/storage";
import { seededRandom } from "../helpers";

/** Clustered unit vectors (a mixture in a few latent dimensions, spread out, with an offset). */
export function clustered(seed: number, dims: number) {
  const draw = labelled(seed, dims);
  return () => draw().v;
}

/** The same, each with its cluster (one of `clusters`). */
export function labelled(seed: number, dims: number, clusters = 12) {
  const rand = seededRandom(seed);
  const gauss = () => Math.sqrt(-2 * Math.log(rand() + 1e-12)) * Math.cos(2 * Math.PI * rand());
  const centres = Array.from({ length: clusters }, () => Array.from({ length: 6 }, gauss));
  const offset = Array.from({ length: dims }, () => gauss() * 0.5);
  const map = Array.from({ length: dims }, () => [Math.floor(rand() * 6), rand() < 0.5 ? -1 : 1]);
  return () => {
    const cluster = Math.floor(rand() * centres.length);
    const z = centres[cluster].map((x) => x + 0.6 * gauss());
    const v = Float32Array.from({ length: dims }, (_, j) => offset[j] + map[j][1] * z[map[j][0]] + 0.3 * gauss());
    const n = Math.hypot(...v);
    return { v: v.map((x) => x / n), cluster };
  };
}

/** The dot product of two vectors of one length. */
export const dot = (a: Float32Array, b: Float32Array) => a.reduce((s, x, j) => s + x * b[j], 0);

/** The benches' memory `j` of a namespace: an ADD for one of 1,000 entities, with its vector. */
export const addOp = (namespace: string, j: number, content: string, vector: Float32Array): MemoryOp => ({
  event: "ADD",
  create: {
    id: Bun.randomUUIDv7(),
    namespace,
    entity: `e${j % 1000}`,
    content,
    category: "fact",
    importance: 0.5,
    vector,
  },
});
