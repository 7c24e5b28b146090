// The 4-bit code of one vector (four-bit.ts's put) in WebAssembly SIMD: its largest absolute
// value (f32x4), then each value as (x * k + 8.5) truncated, k = 7 / that largest, all in f32
// (four lanes a step; f64, as a JavaScript loop computes it, took twice the steps for codes that
// differ only where a value falls within f32's rounding of a level's edge). About 4x faster than
// that loop (a vector followed as a namespace grows pays it on the store path: issue 32). The
// module is built here, byte by byte (wasm.ts), as dot.ts and hamming.ts are.
//   put(v, n, out) -> max: the n floats at v (n a multiple of 32, zero-padded) as n / 2 bytes
//                          at out (two values a byte, the even one in the low nibble)

import { add, get, I32, i32, leb, moduleOf, nextWhileBelow, set, tee, V128, v128Zero, vec } from "./wasm";

const F32 = 0x7d;
const simd = (...op: number[]) => [0xfd, ...op];
const load = (offset: number) => [...simd(0x00), 0x04, ...leb(offset)]; // v128.load align=16
const store = [...simd(0x0b), 0x04, 0x00];
const shuffle = (lanes: number[]) => [...simd(0x0d), ...lanes];
const f32 = (x: number) => [0x43, ...new Uint8Array(Float32Array.of(x).buffer)];
const lane = (l: number) => simd(0x1f).concat(l); // f32x4.extract_lane
const absMask = [...simd(0x0c), ...new Array(4).fill([0xff, 0xff, 0xff, 0x7f]).flat()];

// Locals: params 0 v, 1 n, 2 out; 3 at, 4 end, 5 acc, 6 k, 7 half, 8 a, 9 max
const AT = 3;
const END = 4;
const ACC = 5;
const K = 6;
const HALF = 7;
const A = 8;
const MAX = 9;

/** The four values at `at` + offset as i32x4 codes. */
const four = (offset: number) => [
  ...get(AT),
  ...load(offset),
  ...get(K),
  ...simd(0xe6, 0x01), // f32x4.mul
  ...get(HALF),
  ...simd(0xe4, 0x01), // f32x4.add
  ...simd(0xf8, 0x01), // i32x4.trunc_sat_f32x4_s
];
/**
 * The sixteen values at `at` + offset as sixteen bytes, each byte's high nibble moved beside the
 * low one below it (byte 2j then holds code 2j | code 2j+1 << 4).
 */
const sixteen = (offset: number) => [
  ...four(offset),
  ...four(offset + 16),
  ...simd(0x85, 0x01), // i16x8.narrow_i32x4_s
  ...four(offset + 32),
  ...four(offset + 48),
  ...simd(0x85, 0x01),
  ...simd(0x66), // i8x16.narrow_i16x8_u
  ...tee(A),
  ...get(A),
  ...i32(4),
  ...simd(0x8d, 0x01), // i16x8.shr_u
  ...simd(0x50), // v128.or
];

const put = [
  ...vec([
    [2, I32],
    [4, V128],
    [1, F32],
  ]),
  // end = v + n * 4; acc = max |x|, four lanes
  ...get(0),
  ...get(1),
  ...i32(2),
  0x74, // i32.shl
  add,
  ...set(END),
  ...v128Zero,
  ...set(ACC),
  ...get(0),
  ...set(AT),
  0x03,
  0x40, // loop
  ...get(ACC),
  ...get(AT),
  ...load(0),
  ...absMask,
  ...simd(0x4e), // v128.and: |x|, whose bits order as the values do
  ...simd(0xb9, 0x01), // i32x4.max_u (f32x4.max measured 8x slower here)
  ...set(ACC),
  ...nextWhileBelow(AT, 16, END),
  0x0b,
  ...get(ACC),
  ...get(ACC),
  ...get(ACC),
  ...shuffle([8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7]),
  ...simd(0xb9, 0x01),
  ...tee(ACC),
  ...get(ACC),
  ...get(ACC),
  ...shuffle([4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3]),
  ...simd(0xb9, 0x01),
  ...lane(0),
  ...set(MAX),
  // k = max > 0 ? 7 / max : 0
  ...f32(7),
  ...get(MAX),
  0x95, // f32.div
  ...f32(0),
  ...get(MAX),
  ...f32(0),
  0x5e, // f32.gt
  0x1b, // select
  ...simd(0x13), // f32x4.splat
  ...set(K),
  ...f32(8.5),
  ...simd(0x13),
  ...set(HALF),
  // 32 values (128 bytes) to 16 bytes a turn
  ...get(0),
  ...set(AT),
  0x03,
  0x40,
  ...get(2),
  ...sixteen(0),
  ...sixteen(64),
  ...shuffle([0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30]),
  ...store,
  ...get(2),
  ...i32(16),
  add,
  ...set(2),
  ...nextWhileBelow(AT, 128, END),
  0x0b,
  ...get(MAX),
  0x0b,
];

const moduleBytes = moduleOf([[0x60, ...vec([[I32], [I32], [I32]]), ...vec([[F32]])]], [["put", 0, put]]);

interface Exports {
  memory: WebAssembly.Memory;
  put(v: number, n: number, out: number): number;
}

let kernel: Exports | undefined;
let floats = new Float32Array(0);
let bytes = new Uint8Array(0);

/**
 * Writes the 4-bit codes of v (Math.ceil(v.length / 2) bytes) into `codes` at `at`, and returns
 * v's largest absolute value. One instance serves every FourBit (puts run one at a time).
 */
export function putFourBit(v: Float32Array, codes: Uint8Array, at: number): number {
  const n = Math.ceil(v.length / 32) * 32;
  const out = n * 4;
  if (out + n / 2 > bytes.length) room(out + n / 2);
  floats.set(v);
  if (v.length < n) floats.fill(0, v.length, n);
  const max = kernel!.put(0, n, out);
  codes.set(bytes.subarray(out, out + Math.ceil(v.length / 2)), at);
  return max;
}

/** Makes the kernel (once) and its memory at least `need` bytes. */
function room(need: number) {
  kernel ??= new WebAssembly.Instance(new WebAssembly.Module(moduleBytes), {}).exports as unknown as Exports;
  const have = kernel.memory.buffer.byteLength;
  if (have < need) kernel.memory.grow(Math.ceil((need - have) / 65536));
  floats = new Float32Array(kernel.memory.buffer);
  bytes = new Uint8Array(kernel.memory.buffer);
}
