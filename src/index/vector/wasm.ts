// Encoders for the WebAssembly modules that dot.ts and hamming.ts build byte by byte (the
// binary format's LEB128 numbers, vectors, sections, and the few instructions both use).

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
