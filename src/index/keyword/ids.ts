// A document's id in a keyword space: a UUID as 4 words (16 bytes, where the string takes 36 and an
// object more), and the hash of the open-addressing table that finds a document by its id
// (documents.ts).
import { lowerUuidPattern } from "../../wire/schemas";

/** A UUID's 4 words. */
export type Words = [number, number, number, number];

const UUID = new RegExp(lowerUuidPattern);
export const hex8 = (n: number) => (n >>> 0).toString(16).padStart(8, "0");

/** An id's 4 words (a UUID's), or undefined for any other id. */
export function words(id: string): Words | undefined {
  if (id.length !== 36 || !UUID.test(id)) return undefined;
  return [
    Number.parseInt(id.slice(0, 8), 16) | 0,
    Number.parseInt(id.slice(9, 13) + id.slice(14, 18), 16) | 0,
    Number.parseInt(id.slice(19, 23) + id.slice(24, 28), 16) | 0,
    Number.parseInt(id.slice(28, 36), 16) | 0,
  ];
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
