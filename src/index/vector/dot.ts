// Dot products of one query against many stored vectors, in WebAssembly SIMD (f32x4, two
// accumulators): about 3x faster than the same loop in JavaScript. The module is built here,
// byte by byte, so there is no build step and nothing to load at run time.
//   dense(m, q, dimsBytes, rows, out):        out[r] = Σ m[r][j]·q[j] for r < rows
//   gather(m, q, dimsBytes, idx, count, out): out[k] = Σ m[idx[k]][j]·q[j] for k < count
// Addresses are byte offsets into the module's memory; dimsBytes must be a multiple of 32.

import { add, brIf0, get, I32, i32, moduleOf, nextWhileBelow, params, set, V128, v128Zero, vec } from "./wasm";

const load = (offset: number) => [0xfd, 0x00, 0x04, offset]; // v128.load align=16
const fmul = [0xfd, 0xe6, 0x01];
const fadd = [0xfd, 0xe4, 0x01];
const lane = (a: number, l: number) => [...get(a), 0xfd, 0x1f, l]; // f32x4.extract_lane
const sumLanes = (a: number) => [...lane(a, 0), ...lane(a, 1), 0x92, ...lane(a, 2), 0x92, ...lane(a, 3), 0x92];
const storeF32 = [0x38, 0x02, 0x00];

/** a, b = Σ row[j..j+8]·q[j..j+8]; then a += b. */
const dotLoop = (row: number, q: number, dims: number, j: number, a: number, b: number) => [
  ...v128Zero,
  ...set(a),
  ...v128Zero,
  ...set(b),
  ...i32(0),
  ...set(j),
  0x03,
  0x40, // loop
  ...get(a),
  ...get(row),
  ...get(j),
  add,
  ...load(0),
  ...get(q),
  ...get(j),
  add,
  ...load(0),
  ...fmul,
  ...fadd,
  ...set(a),
  ...get(b),
  ...get(row),
  ...get(j),
  add,
  ...load(16),
  ...get(q),
  ...get(j),
  add,
  ...load(16),
  ...fmul,
  ...fadd,
  ...set(b),
  ...nextWhileBelow(j, 32, dims),
  0x0b, // end loop
  ...get(a),
  ...get(b),
  ...fadd,
  ...set(a),
];

// dense: params 0 m, 1 q, 2 dimsBytes, 3 rows, 4 out; locals 5 j, 6 end, 7 a, 8 b
const dense = [
  ...vec([
    [2, I32],
    [2, V128],
  ]),
  0x02,
  0x40, // block
  ...get(3),
  0x45,
  ...brIf0, // rows == 0: done
  ...get(4),
  ...get(3),
  ...i32(2),
  0x74,
  add,
  ...set(6), // end = out + rows * 4
  0x03,
  0x40, // loop over rows
  ...dotLoop(0, 1, 2, 5, 7, 8),
  ...get(4),
  ...sumLanes(7),
  ...storeF32,
  ...get(0),
  ...get(2),
  add,
  ...set(0),
  ...nextWhileBelow(4, 4, 6),
  0x0b,
  0x0b,
  0x0b,
];

// gather: params 0 m, 1 q, 2 dimsBytes, 3 idx, 4 count, 5 out; locals 6 j, 7 end, 8 row, 9 a, 10 b
const gather = [
  ...vec([
    [3, I32],
    [2, V128],
  ]),
  0x02,
  0x40,
  ...get(4),
  0x45,
  ...brIf0,
  ...get(3),
  ...get(4),
  ...i32(2),
  0x74,
  add,
  ...set(7), // end = idx + count * 4
  0x03,
  0x40,
  ...get(0),
  ...get(3),
  0x28,
  0x02,
  0x00, // i32.load idx[k]
  ...get(2),
  0x6c,
  add,
  ...set(8), // row = m + idx[k] * dimsBytes
  ...dotLoop(8, 1, 2, 6, 9, 10),
  ...get(5),
  ...sumLanes(9),
  ...storeF32,
  ...get(5),
  ...i32(4),
  add,
  ...set(5),
  ...nextWhileBelow(3, 4, 7),
  0x0b,
  0x0b,
  0x0b,
];

const moduleBytes = moduleOf(
  [params(5), params(6)],
  [
    ["dense", 0, dense],
    ["gather", 1, gather],
  ],
);

let compiled: WebAssembly.Module | undefined;

export interface DotKernel {
  memory: WebAssembly.Memory;
  dense(m: number, q: number, dimsBytes: number, rows: number, out: number): void;
  gather(m: number, q: number, dimsBytes: number, idx: number, count: number, out: number): void;
}

/** A new instance, with its own memory (one page; grow it). */
export function dotKernel(): DotKernel {
  compiled ??= new WebAssembly.Module(moduleBytes);
  return new WebAssembly.Instance(compiled, {}).exports as unknown as DotKernel;
}
