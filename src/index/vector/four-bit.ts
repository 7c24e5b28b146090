// A 4-bit copy of each vector of a VectorSpace (./space.ts), kept beside its binary codes
// as its RowKeeper: 384 + 4 bytes at 768 dimensions, where the float32 vector is 3,072. It ranks
// the codes' candidates again (each dimension one of 15 levels instead of one bit), so a search
// reads exactly only the best few of them (`exactReads`): both backends keep one, and score
// every answer from the exact vector afterwards (LMDB: lmdb/search.ts; PostgreSQL:
// postgres/search.ts).
import { putFourBit } from "./four-bit-kernel";
import type { RowKeeper } from "./space";

/**
 * How many of the 4-bit ranking's best a search reads exactly at first: it puts the exact best 10
 * among its best 32 (recall@10 at 1,000,000 vectors: 0.967 reading 24, 0.971 reading 32 or 800;
 * bench/notes.md).
 */
export const exactReads = (limit: number) => limit * 2 + 12;

/**
 * Rows per block of the 4-bit copy (a full block is allocated whole, so growing past the first
 * never copies). The first grows by doubling from FIRST rows: a small namespace (a shared server
 * holds many) takes a few KB, not a block's 6 MB at 768 dimensions.
 */
const BLOCK = 1 << 14;
const FIRST = 8;

/**
 * A 4-bit copy of each row's vector: each dimension rounded to one of 15 levels of ±(its largest
 * absolute value), two a byte, and that scale (float32). Zero stays exactly zero.
 */
export class FourBit implements RowKeeper {
  private dims = 0;
  private bytes = 0;
  private blocks: Uint8Array[] = [];
  private scales: Float32Array[] = [];
  private out = new Float32Array(0);

  put(row: number, v: Float32Array) {
    if (this.dims === 0) {
      this.dims = v.length;
      this.bytes = Math.ceil(v.length / 2);
      this.out = new Float32Array(v.length);
    }
    const b = row >>> 14;
    this.room(b, row & (BLOCK - 1));
    const max = putFourBit(v, this.blocks[b], (row & (BLOCK - 1)) * this.bytes);
    this.scales[b][row & (BLOCK - 1)] = max / 7;
  }

  /** Makes block b hold row r of its own (blocks before it full). */
  private room(b: number, r: number) {
    const first = this.blocks[0];
    if (b === 0 && first !== undefined && r < this.scales[0].length) return;
    if (first !== undefined && this.scales[0].length < BLOCK) {
      let rows = this.scales[0].length;
      while (rows <= (b === 0 ? r : BLOCK - 1)) rows *= 2;
      const codes = new Uint8Array(rows * this.bytes);
      codes.set(first);
      const scales = new Float32Array(rows);
      scales.set(this.scales[0]);
      this.blocks[0] = codes;
      this.scales[0] = scales;
    }
    while (this.blocks.length <= b) {
      let rows = BLOCK;
      if (this.blocks.length === 0 && b === 0) for (rows = FIRST; rows <= r; ) rows *= 2;
      this.blocks.push(new Uint8Array(rows * this.bytes));
      this.scales.push(new Float32Array(rows));
    }
  }

  /** Its rows 0..rows-1 as two copies: the codes, then the scales (VectorSpace.freeze). */
  freeze(rows: number): ArrayBufferView[] {
    const codes = new Uint8Array(rows * this.bytes);
    const scales = new Float32Array(rows);
    for (let b = 0; b * BLOCK < rows; b++) {
      const n = Math.min(BLOCK, rows - b * BLOCK);
      codes.set(this.blocks[b].subarray(0, n * this.bytes), b * BLOCK * this.bytes);
      scales.set(this.scales[b].subarray(0, n), b * BLOCK);
    }
    return [Uint32Array.of(this.dims), codes, scales];
  }

  /**
   * Takes back what freeze gave, as blocks laid out as put makes them: each full block a view of
   * the sections (no copy: at 1,000,000 vectors of 768 dimensions they are 390 MB, and a snapshot
   * file is mapped, so its pages are read as they are used), the last one copied (it grows).
   */
  thaw(sections: Uint8Array<ArrayBuffer>[], rows: number): boolean {
    if (sections.length !== 3 || sections[0].length !== 4) return false;
    const dims = new Uint32Array(sections[0].buffer, sections[0].byteOffset, 1)[0];
    if (dims === 0) return rows === 0;
    const codes = sections[1];
    if (codes.length !== rows * Math.ceil(dims / 2) || sections[2].length !== rows * 4) return false;
    this.dims = dims;
    this.bytes = Math.ceil(dims / 2);
    this.out = new Float32Array(dims);
    const scales = new Float32Array(sections[2].buffer, sections[2].byteOffset, sections[2].byteLength / 4);
    let first = FIRST;
    while (first < rows && first < BLOCK) first *= 2;
    for (let b = 0; b === 0 || b * BLOCK < rows; b++) {
      const size = rows <= BLOCK ? first : BLOCK;
      const n = Math.max(0, Math.min(size, rows - b * BLOCK));
      const from = b * BLOCK;
      if (n === BLOCK) {
        this.blocks.push(codes.subarray(from * this.bytes, (from + BLOCK) * this.bytes));
        this.scales.push(scales.subarray(from, from + BLOCK));
        this.borrowed = true;
        continue;
      }
      const block = new Uint8Array(size * this.bytes);
      block.set(codes.subarray(from * this.bytes, (from + n) * this.bytes));
      const scale = new Float32Array(size);
      scale.set(scales.subarray(from, from + n));
      this.blocks.push(block);
      this.scales.push(scale);
    }
    return true;
  }

  /** Whether some blocks are views of what thaw was given. */
  private borrowed = false;

  /**
   * Copies the blocks that are views of what thaw was given, so that nothing it holds refers to
   * them any more (LMDB: the snapshot file was deleted by an erasure; its mapping goes once
   * collected).
   */
  own() {
    if (!this.borrowed) return;
    this.blocks = this.blocks.map((b) => b.slice());
    this.scales = this.scales.map((s) => s.slice());
    this.borrowed = false;
  }

  /** What it holds, in bytes (its blocks). */
  heldBytes(): number {
    let n = this.out.byteLength + this.qEven.byteLength * 2;
    for (let b = 0; b < this.blocks.length; b++) n += this.blocks[b].byteLength + this.scales[b].byteLength;
    return n;
  }

  move(from: number, to: number) {
    this.room(to >>> 14, to & (BLOCK - 1));
    const fb = this.blocks[from >>> 14];
    const f = (from & (BLOCK - 1)) * this.bytes;
    this.blocks[to >>> 14].set(fb.subarray(f, f + this.bytes), (to & (BLOCK - 1)) * this.bytes);
    this.scales[to >>> 14][to & (BLOCK - 1)] = this.scales[from >>> 14][from & (BLOCK - 1)];
  }

  /** The query split in even and odd dimensions, for dot (remade when the query changes). */
  private q: Float32Array | undefined;
  private qEven = new Float32Array(0);
  private qOdd = new Float32Array(0);
  private qSum = 0;

  /** Row's vector (as decoded) · q, from the 4-bit codes, without decoding them. */
  dot(row: number, q: Float32Array): number {
    if (q !== this.q) {
      this.q = q;
      this.qEven = new Float32Array(this.bytes);
      this.qOdd = new Float32Array(this.bytes);
      this.qSum = 0;
      for (let j = 0; j < this.bytes; j++) {
        this.qEven[j] = q[2 * j] ?? 0;
        this.qOdd[j] = q[2 * j + 1] ?? 0;
        this.qSum += this.qEven[j] + this.qOdd[j];
      }
    }
    const b = row >>> 14;
    const codes = this.blocks[b];
    const at = (row & (BLOCK - 1)) * this.bytes;
    const even = this.qEven;
    const odd = this.qOdd;
    let acc = 0;
    for (let j = 0; j < this.bytes; j++) {
      const c = codes[at + j];
      acc += even[j] * (c & 15) + odd[j] * (c >>> 4);
    }
    return (acc - 8 * this.qSum) * this.scales[b][row & (BLOCK - 1)];
  }

  /** Row's vector as float32 bytes, decoded into a buffer reused by the next call. */
  read(row: number): Uint8Array | undefined {
    const b = row >>> 14;
    if (this.dims === 0 || b >= this.blocks.length || (row & (BLOCK - 1)) >= this.scales[b].length) return undefined;
    const codes = this.blocks[b];
    const s = this.scales[b][row & (BLOCK - 1)];
    const at = (row & (BLOCK - 1)) * this.bytes;
    const out = this.out;
    for (let j = 0; j < this.bytes; j++) {
      const c = codes[at + j];
      out[2 * j] = ((c & 15) - 8) * s;
      if (2 * j + 1 < this.dims) out[2 * j + 1] = ((c >>> 4) - 8) * s;
    }
    return new Uint8Array(out.buffer);
  }
}
