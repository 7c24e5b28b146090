// The static embedder's weighted mean in WebAssembly (static-embedder.ts): the same arithmetic as
// its loop in JavaScript, step for step, so every vector is bit-identical, in about a fifth of
// the time (the mean was most of an embedding's CPU: ~6 ns a multiply-add in JavaScript). Each
// step is done as JavaScript does `v[d] += s * table[row + d]` on a Float32Array: the int8 and
// the f32 widened to f64, multiplied and added in f64, rounded to f32 (here on two lanes of f64
// at a time). Built byte by byte like src/index/vector/dot.ts.
//   sum(rows, scales, rowsEnd, out, outEnd):   for each token: out[d] = f32(out[d] + scale·row[d])
//   finish(out, outEnd, mean, total):          out[d] = f32(out[d] / total − mean[d]); then ÷ its norm
// rows: i32 byte offsets of the tokens' table rows; scales: their f64 weights; addresses in bytes.

import {
  add,
  brIf0,
  get,
  I32,
  i32,
  leb,
  ltU,
  moduleOf,
  nextWhileBelow,
  params,
  set,
  V128,
  vec,
} from "../index/vector/wasm";

const F64 = 0x7c;
const F32 = 0x7d;
const simd = (op: number, ...imm: number[]) => [0xfd, ...leb(op), ...imm];
const memarg = (align: number) => [align, 0];

/** Lanes 2 and 3 (bytes 8-15) of a v128 moved to lanes 0 and 1. */
const high = (local: number) => [
  ...get(local),
  ...get(local),
  ...simd(0x0d, 8, 9, 10, 11, 12, 13, 14, 15, 8, 9, 10, 11, 12, 13, 14, 15),
];
/** f64x2: the f32 lanes 0-1 of the v128 on the stack (local `acc` or its high half) + its ints × s. */
const step = (acc: number[], ints: number[], s: number) => [
  ...acc,
  ...simd(0x5f), // f64x2.promote_low_f32x4
  ...ints,
  ...simd(0xfe), // f64x2.convert_low_i32x4_s
  ...get(s),
  ...simd(0xf2), // f64x2.mul
  ...simd(0xf0), // f64x2.add
  ...simd(0x5e), // f32x4.demote_f64x2_zero
];

// sum: params 0 rows, 1 scales, 2 rowsEnd, 3 out, 4 outEnd; locals 5 row, 6 p, 7 s, 8 acc, 9 ints
const sum = [
  ...vec([
    [2, I32],
    [3, V128],
  ]),
  0x02,
  0x40, // block
  ...get(0),
  ...get(2),
  ltU,
  0x45,
  ...brIf0, // no token: done
  0x03,
  0x40, // loop over tokens
  ...get(0),
  0x28,
  ...memarg(2), // i32.load
  ...set(5),
  ...get(1),
  0x2b,
  ...memarg(3), // f64.load
  ...simd(0x14), // f64x2.splat
  ...set(7),
  ...get(3),
  ...set(6),
  0x03,
  0x40, // loop over dims, 4 at a time
  ...get(5),
  ...simd(0x5c, ...memarg(0)), // v128.load32_zero: 4 int8
  ...simd(0x87), // i16x8.extend_low_i8x16_s
  ...simd(0xa7), // i32x4.extend_low_i16x8_s
  ...set(9),
  ...get(6),
  ...simd(0x00, ...memarg(4)), // v128.load: 4 f32
  ...set(8),
  ...get(6),
  ...step(get(8), get(9), 7),
  ...step(high(8), high(9), 7),
  ...simd(0x0d, ...[0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23]), // lanes 0-1 of each
  ...simd(0x0b, ...memarg(4)), // v128.store
  ...get(5),
  ...i32(4),
  add,
  ...set(5),
  ...nextWhileBelow(6, 16, 4),
  0x0b, // end dims
  ...get(1),
  ...i32(8),
  add,
  ...set(1),
  ...nextWhileBelow(0, 4, 2),
  0x0b, // end tokens
  0x0b, // end block
  0x0b,
];

// finish: params 0 out, 1 outEnd, 2 mean, 3 total (f64); locals 4 p, 5 m, 6 x (f32), 7 norm (f64)
const finish = [
  ...vec([
    [2, I32],
    [1, F32],
    [1, F64],
  ]),
  ...get(0),
  ...set(4),
  ...get(2),
  ...set(5),
  0x03,
  0x40, // x = f32(out[d] / total - mean[d]); norm += x·x
  ...get(4),
  ...get(4),
  0x2a,
  ...memarg(2), // f32.load
  0xbb, // f64.promote_f32
  ...get(3),
  0xa3, // f64.div
  ...get(5),
  0x2a,
  ...memarg(2),
  0xbb,
  0xa1, // f64.sub
  0xb6, // f32.demote_f64
  0x22,
  ...leb(6), // local.tee x
  0x38,
  ...memarg(2), // f32.store
  ...get(7),
  ...get(6),
  0xbb,
  ...get(6),
  0xbb,
  0xa2, // f64.mul
  0xa0, // f64.add
  ...set(7),
  ...get(5),
  ...i32(4),
  add,
  ...set(5),
  ...nextWhileBelow(4, 4, 1),
  0x0b,
  ...get(7),
  0x9f, // f64.sqrt
  0x22,
  ...leb(7),
  0x44,
  ...new Array(8).fill(0), // f64.const 0
  0x64, // f64.gt
  0x04,
  0x40, // if norm > 0: out[d] = f32(out[d] / norm)
  ...get(0),
  ...set(4),
  0x03,
  0x40,
  ...get(4),
  ...get(4),
  0x2a,
  ...memarg(2),
  0xbb,
  ...get(7),
  0xa3,
  0xb6,
  0x38,
  ...memarg(2),
  ...nextWhileBelow(4, 4, 1),
  0x0b, // end loop
  0x0b, // end if
  0x0b,
];

const moduleBytes = moduleOf(
  [params(5), [0x60, ...vec([[I32], [I32], [I32], [F64]]), 0]],
  [
    ["sum", 0, sum],
    ["finish", 1, finish],
  ],
);

export interface MeanKernel {
  memory: WebAssembly.Memory;
  sum(rows: number, scales: number, rowsEnd: number, out: number, outEnd: number): void;
  finish(out: number, outEnd: number, mean: number, total: number): void;
}

/** A new instance, with its own memory (one page; grow it). */
export function meanKernel(): MeanKernel {
  return new WebAssembly.Instance(new WebAssembly.Module(moduleBytes), {}).exports as unknown as MeanKernel;
}
