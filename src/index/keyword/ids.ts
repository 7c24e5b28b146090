// A document's id in a keyword space: a UUID as 4 words (16 bytes, where the string takes 36 and an
// object more), and the hash of the open-addressing table that finds a document by its id
// (documents.ts).

/** A UUID's 4 words. */
export type Words = [number, number, number, number];

export const hex8 = (n: number) => (n >>> 0).toString(16).padStart(8, "0");

/** A lowercase hex digit's value, -1 for any other character (by char code, 0-127). */
const HEX = new Int8Array(128).fill(-1);
for (let i = 0; i < 16; i++) HEX["0123456789abcdef".charCodeAt(i)] = i;

/**
 * The word of 8 hex digits of `id` at these positions (a UUID's dashes skipped), or -1 with
 * `bad` set (as a parse of the lowercase UUID pattern, by char codes: on every store followed).
 */
let bad = false;
function word8(id: string, at: number, dash: number): number {
  let n = 0;
  for (let i = at, k = 0; k < 8; i++) {
    if (i === dash) continue;
    const c = id.charCodeAt(i);
    const v = c < 128 ? HEX[c] : -1;
    if (v < 0) {
      bad = true;
      return 0;
    }
    n = (n << 4) | v;
    k++;
  }
  return n;
}

/** An id's 4 words (a lowercase UUID's), or undefined for any other id. */
export function words(id: string): Words | undefined {
  if (id.length !== 36 || id[8] !== "-" || id[13] !== "-" || id[18] !== "-" || id[23] !== "-") return undefined;
  bad = false;
  const w: Words = [word8(id, 0, -1), word8(id, 9, 13), word8(id, 19, 23), word8(id, 28, -1)];
  return bad ? undefined : w;
}

export function hash(id: string, w: Words | undefined): number {
  if (w) return Math.imul(w[3] ^ Math.imul(w[2], 0x9e3779b1) ^ w[0], 0x85ebca6b);
  let h = 0x811c9dc5;
  for (let i = 0; i < id.length; i++) h = Math.imul(h ^ id.charCodeAt(i), 16777619);
  return h;
}

/** The size of a table for `size` documents: a power of 2, at least twice as many. */
export function tableSize(size: number) {
  let n = 8;
  while (n < size * 2) n *= 2;
  return n;
}
