// Each row's id in a VectorSpace, and the row of an id: a UUID as 4 words in one typed array and an
// open-addressing table of rows, other ids as strings. A Map of a million id strings takes one to
// two seconds to make when a space is thawed (vector snapshots: the first search after a restart
// waits for it); this table is made from the snapshot's words in tens of milliseconds. An id's
// string is made when asked for, and kept until its row changes.
import { hash, hex8, tableSize, type Words, words } from "../keyword/ids";

export class RowIds {
  /** 4 words per row (a UUID's). */
  private w = new Int32Array(0);
  /** Per row: 1 when its id is a UUID held in `w`. */
  private uuid = new Uint8Array(0);
  /** Per row: its id as a string, when made (always, for an id that is not a UUID). */
  private names: (string | undefined)[] = [];
  /** Row + 1 per slot, 0 when empty; at most half full. */
  private table = new Int32Array(8);
  private live = 0;

  /** Room for `n` rows. */
  reserve(n: number) {
    if (n <= this.uuid.length) return;
    const capacity = Math.max(n, Math.min(this.uuid.length * 2 || 64, this.uuid.length + 262144));
    const w = new Int32Array(capacity * 4);
    w.set(this.w);
    const uuid = new Uint8Array(capacity);
    uuid.set(this.uuid);
    this.w = w;
    this.uuid = uuid;
  }

  /** The row holding `id`, or -1. */
  find(id: string): number {
    const wd = words(id);
    const mask = this.table.length - 1;
    for (let x = hash(id, wd) & mask; ; x = (x + 1) & mask) {
      const v = this.table[x];
      if (v === 0) return -1;
      if (this.holds(v - 1, id, wd)) return v - 1;
    }
  }

  private holds(r: number, id: string, wd: Words | undefined): boolean {
    if (!wd) return this.uuid[r] === 0 && this.names[r] === id;
    const w = this.w;
    return (
      this.uuid[r] === 1 &&
      w[r * 4] === wd[0] &&
      w[r * 4 + 1] === wd[1] &&
      w[r * 4 + 2] === wd[2] &&
      w[r * 4 + 3] === wd[3]
    );
  }

  /** The table hash of row r's id (as hash() of it). */
  private hashOf(r: number): number {
    if (this.uuid[r] === 0) return hash(this.names[r]!, undefined);
    const w = this.w;
    return Math.imul(w[r * 4 + 3] ^ Math.imul(w[r * 4 + 2], 0x9e3779b1) ^ w[r * 4], 0x85ebca6b);
  }

  private insert(r: number) {
    if ((this.live + 1) * 2 > this.table.length) this.rehash(tableSize(this.live + 1));
    const mask = this.table.length - 1;
    let x = this.hashOf(r) & mask;
    while (this.table[x] !== 0) x = (x + 1) & mask;
    this.table[x] = r + 1;
    this.live++;
  }

  private rehash(size: number) {
    const old = this.table;
    this.table = new Int32Array(size);
    const mask = size - 1;
    for (const v of old) {
      if (v === 0) continue;
      let x = this.hashOf(v - 1) & mask;
      while (this.table[x] !== 0) x = (x + 1) & mask;
      this.table[x] = v;
    }
  }

  /** The slot pointing to row r. */
  private slotOf(r: number): number {
    const mask = this.table.length - 1;
    for (let x = this.hashOf(r) & mask; ; x = (x + 1) & mask) if (this.table[x] === r + 1) return x;
  }

  /** Row r (room reserved, holding no id) now holds `id` (not held by another row). */
  set(r: number, id: string) {
    const wd = words(id);
    if (wd) {
      this.w.set(wd, r * 4);
      this.uuid[r] = 1;
    } else this.uuid[r] = 0;
    this.names[r] = id;
    this.insert(r);
  }

  /** Row r no longer holds an id (linear probing: the entries after its slot move back). */
  delete(r: number) {
    const mask = this.table.length - 1;
    let hole = this.slotOf(r);
    this.table[hole] = 0;
    this.live--;
    for (let x = (hole + 1) & mask; this.table[x] !== 0; x = (x + 1) & mask) {
      const home = this.hashOf(this.table[x] - 1) & mask;
      // Moved back when its home is not within (hole, x] cyclically.
      if (hole <= x ? home <= hole || home > x : home <= hole && home > x) {
        this.table[hole] = this.table[x];
        this.table[x] = 0;
        hole = x;
      }
    }
    this.names[r] = undefined;
  }

  /** The id of row `from` (which then holds none) is now row `to`'s (which held none). */
  move(from: number, to: number) {
    this.table[this.slotOf(from)] = to + 1;
    this.w.copyWithin(to * 4, from * 4, from * 4 + 4);
    this.uuid[to] = this.uuid[from];
    this.names[to] = this.names[from];
    this.names[from] = undefined;
  }

  /** Row r's id. */
  idAt(r: number): string {
    let id = this.names[r];
    if (id === undefined) {
      const w = this.w;
      const a = hex8(w[r * 4 + 1]);
      const b = hex8(w[r * 4 + 2]);
      id = `${hex8(w[r * 4])}-${a.slice(0, 4)}-${a.slice(4)}-${b.slice(0, 4)}-${b.slice(4)}${hex8(w[r * 4 + 3])}`;
      this.names[r] = id;
    }
    return id;
  }

  /**
   * Copies of rows 0..rows-1 (every row it holds: rows are dense): their words, their UUID flags,
   * the table (so a thaw does not make it again: 90 ms at 1,000,000), and the other ids by row.
   */
  freeze(rows: number): { words: Int32Array; uuid: Uint8Array; table: Int32Array; other: [number, string][] } {
    const other: [number, string][] = [];
    for (let r = 0; r < rows; r++) if (this.uuid[r] === 0) other.push([r, this.names[r]!]);
    const table = this.live === rows ? this.table.slice() : new Int32Array(0);
    return { words: this.w.slice(0, rows * 4), uuid: this.uuid.slice(0, rows), table, other };
  }

  /** Ids of `rows` rows from what freeze gave (the table made from them when it gave none that fits). */
  static thaw(
    w: Int32Array,
    uuid: Uint8Array,
    table: Int32Array,
    other: [number, string][],
    rows: number,
  ): RowIds | undefined {
    if (w.length !== rows * 4 || uuid.length !== rows) return undefined;
    const ids = new RowIds();
    ids.reserve(rows);
    ids.w.set(w);
    ids.uuid.set(uuid);
    for (const [r, id] of other) ids.names[r] = id;
    for (let r = 0; r < rows; r++) if (ids.uuid[r] === 0 && ids.names[r] === undefined) return undefined;
    const size = table.length;
    if (size >= tableSize(rows) && (size & (size - 1)) === 0) {
      ids.table = table.slice();
      ids.live = rows;
    } else {
      ids.table = new Int32Array(tableSize(rows));
      for (let r = 0; r < rows; r++) ids.insert(r);
    }
    return ids;
  }
}
