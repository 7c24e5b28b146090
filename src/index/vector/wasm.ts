// Encoders for the WebAssembly modules that the kernels build byte by byte (dot.ts, hamming.ts,
// four-bit-kernel.ts, embedding/mean-kernel.ts): the binary format's LEB128 numbers, vectors,
// sections, a module's envelope, and the few instructions they share.

export const leb = (n: number): number[] => {
  const out: number[] = [];
  do {
    let b = n & 0x7f;
    n >>>= 7;
    if (n) b |= 0x80;
    out.push(b);
  } while (n);
  return out;
};
/** Signed LEB128, as i32.const takes it. */
export const sleb = (n: number): number[] => {
  const out: number[] = [];
  for (;;) {
    const b = n & 0x7f;
    n >>= 7;
    if ((n === 0 && (b & 0x40) === 0) || (n === -1 && (b & 0x40) !== 0)) return [...out, b];
    out.push(b | 0x80);
  }
};
export const vec = (items: number[][]) => [...leb(items.length), ...items.flat()];
export const section = (id: number, body: number[]) => [id, ...leb(body.length), ...body];
export const name = (s: string) => [...leb(s.length), ...[...s].map((c) => c.charCodeAt(0))];
export const I32 = 0x7f;
/** A function type taking n i32s and returning nothing. */
export const params = (n: number) => [0x60, ...vec(Array.from({ length: n }, () => [I32])), 0];
export const get = (i: number) => [0x20, ...leb(i)];
export const set = (i: number) => [0x21, ...leb(i)];
export const tee = (i: number) => [0x22, ...leb(i)];
export const i32 = (n: number) => [0x41, ...sleb(n)];
export const add = 0x6a;
export const ltU = 0x49;
export const brIf0 = [0x0d, 0x00];
export const V128 = 0x7b;
/** v128.const 0 */
export const v128Zero = [0xfd, 0x0c, ...new Array(16).fill(0)];
/** A loop's closing step: local `at` += step, and round again while it is below local `end`. */
export const nextWhileBelow = (at: number, step: number, end: number) => [
  ...get(at),
  ...i32(step),
  add,
  ...tee(at),
  ...get(end),
  ltU,
  ...brIf0,
];

/**
 * A module of one memory (one page to start, exported as "memory") and `functions`, each
 * [its export name, the index of its type in `types`, its body], exported in that order.
 */
export const moduleOf = (types: number[][], functions: [string, number, number[]][]) =>
  new Uint8Array([
    ...[0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00],
    ...section(1, vec(types)),
    ...section(3, vec(functions.map(([, type]) => [type]))),
    ...section(5, vec([[0x00, 1]])),
    ...section(7, vec([[...name("memory"), 2, 0], ...functions.map(([n], i) => [...name(n), 0, i])])),
    ...section(10, vec(functions.map(([, , body]) => [...leb(body.length), ...body]))),
  ]);
