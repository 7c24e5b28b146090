// Hamming distances of one binary code against many, in WebAssembly, for the approximate vector
// search of space.ts. A module is generated per code length (`words` of 8 bytes), the loop
// over a code unrolled; i64.popcnt is one instruction on x86-64 and arm64, and measured faster
// here than i8x16.popcnt (1,000,000 codes of 4 words: 2.3 ms against 9.6 ms; codes beyond the
// CPU's cache are bound by memory bandwidth either way, about 3 GB/s on the bench machine).
//   scan(c, rows, out):         out[r] = popcount(c[r] xor q) as i32, for r < rows
//   gather(at, count, out):     out[k] = popcount(code at address at[k] xor q), for k < count
//   encode(v, mean, dims, out): the code of the float32 vector at v: bit j (of the little-endian
//                               i32 words at out) set when v[j] > mean[j]; dims a multiple of 32
// The query code sits at byte 0 of the module's memory; c, at and out are byte offsets into it.
// The bytes are built here, so there is no build step and nothing to load at run time.

import { add, brIf0, get, I32, i32, leb, moduleOf, nextWhileBelow, params, set, vec } from "./wasm";

const shl = 0x74;
const eqz = 0x45;
const load32 = [0x28, 0x02, 0x00];
const store32 = [0x36, 0x02, 0x00];
const load64 = (offset: number) => [0x29, 0x03, ...leb(offset)];
const xor64 = 0x85;
const popcnt64 = 0x7b;
const add64 = 0x7c;
const wrap = 0xa7; // i32.wrap_i64

/** Leaves the distance of the code at local `row` to the query (at address 0) on the stack. */
const distance = (words: number, row: number) => {
  const out: number[] = [];
  for (let i = 0; i < words; i++) {
    out.push(...get(row), ...load64(8 * i), ...i32(0), ...load64(8 * i), xor64, popcnt64);
    if (i > 0) out.push(add64);
  }
  out.push(wrap);
  return out;
};

// encode: params 0 v, 1 mean, 2 dims, 3 out; locals 4 j, 5 x
const encode = (() => {
  const group: number[] = [];
  for (let b = 0; b < 8; b++) {
    group.push(...get(0), ...get(4), ...i32(2), shl, add, 0xfd, 0x00, 0x04, ...leb(16 * b)); // v128.load v[j + 4b]
    group.push(...get(1), ...get(4), ...i32(2), shl, add, 0xfd, 0x00, 0x04, ...leb(16 * b)); // mean[j + 4b]
    group.push(0xfd, 0x44, 0xfd, 0xa4, 0x01); // f32x4.gt, i32x4.bitmask
    if (b > 0) group.push(...i32(4 * b), shl, ...get(5), 0x72); // << 4b, or
    group.push(...set(5));
  }
  return [
    ...vec([[2, I32]]),
    0x02,
    0x40,
    ...get(2),
    eqz,
    ...brIf0,
    0x03,
    0x40,
    ...group,
    ...get(3),
    ...get(5),
    ...store32,
    ...get(3),
    ...i32(4),
    add,
    ...set(3),
    ...nextWhileBelow(4, 32, 2),
    0x0b,
    0x0b,
    0x0b,
  ];
})();

function moduleFor(words: number): Uint8Array {
  const bytes = words * 8;
  // scan: params 0 c, 1 rows, 2 out; local 3 end
  const scan = [
    ...vec([[1, I32]]),
    0x02,
    0x40, // block
    ...get(1),
    eqz,
    ...brIf0,
    ...get(2),
    ...get(1),
    ...i32(2),
    shl,
    add,
    ...set(3), // end = out + rows * 4
    0x03,
    0x40, // loop
    ...get(2),
    ...distance(words, 0),
    ...store32,
    ...get(0),
    ...i32(bytes),
    add,
    ...set(0),
    ...nextWhileBelow(2, 4, 3),
    0x0b,
    0x0b,
    0x0b,
  ];
  // gather: params 0 at, 1 count, 2 out; locals 3 end, 4 row
  const gather = [
    ...vec([[2, I32]]),
    0x02,
    0x40,
    ...get(1),
    eqz,
    ...brIf0,
    ...get(0),
    ...get(1),
    ...i32(2),
    shl,
    add,
    ...set(3), // end = at + count * 4
    0x03,
    0x40,
    ...get(0),
    ...load32,
    ...set(4), // row = at[k]
    ...get(2),
    ...distance(words, 4),
    ...store32,
    ...get(2),
    ...i32(4),
    add,
    ...set(2),
    ...nextWhileBelow(0, 4, 3),
    0x0b,
    0x0b,
    0x0b,
  ];
  return moduleOf(
    [params(3), params(4)],
    [
      ["scan", 0, scan],
      ["gather", 0, gather],
      ["encode", 1, encode],
    ],
  );
}

export interface HammingKernel {
  memory: WebAssembly.Memory;
  scan(c: number, rows: number, out: number): void;
  gather(at: number, count: number, out: number): void;
  encode(v: number, mean: number, dims: number, out: number): void;
}

const compiled = new Map<number, WebAssembly.Module>();

/** A new instance for codes of `words` × 8 bytes, with its own memory (one page; grow it). */
export function hammingKernel(words: number): HammingKernel {
  let m = compiled.get(words);
  if (!m) {
    m = new WebAssembly.Module(moduleFor(words));
    compiled.set(words, m);
  }
  return new WebAssembly.Instance(m, {}).exports as unknown as HammingKernel;
}
