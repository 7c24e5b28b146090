// A namespace's vectors in memory as binary codes (one bit per dimension: above or below the
// namespace's mean), so a semantic search over a large namespace reads about 1/32 of the float
// bytes and a million vectors of 768 dimensions take ~100 MB rather than 3 GB. Backend-neutral
// (no engine here): the caller gives `read`, a vector's float32 bytes by id. A search ranks the
// scope's codes by Hamming distance (hamming.ts, WebAssembly), takes the best `ann.rescore` (or
// more) and scores those with its RowKeeper's own `dot` (both backends keep a 4-bit copy of each
// vector: four-bit.ts), or with the vectors `read` gives (dot.ts) when there is no keeper; the
// caller then reads the best few exactly (`score`). Which vectors are looked at is approximate
// once the scope holds more than that; a scope of at most `ann.rescore` vectors is scored whole
// with `read`'s vectors (LMDB: the stored ones, so exact cosines; PostgreSQL: the 4-bit copy).
// Over `ann.cellsFrom` vectors, a namespace's codes are also grouped in cells around `ann.cells`
// of its vectors (an inverted file), and a namespace-wide search ranks only the codes of the
// cells nearest the query, at least `ann.probe` of the namespace: memory bandwidth, not CPU,
// bounds a scan of every code (~30 ms at 1,000,000).
// The caller keeps it in step with its store (set each changed vector, or undefined when gone). A
// row of a memory that is no longer current may linger until then: search checks every candidate
// against its memory record anyway.
import { type DotKernel, dotKernel } from "./dot";
import { type HammingKernel, hammingKernel } from "./hamming";
import { RowIds } from "./row-ids";

/** How the approximate search trades work for recall (tests make them small). */
export const ann = {
  /** At least this many candidates are scored (by `read`'s vectors); a scope this small is scored whole. */
  rescore: 800,
  /** Cells are made once a namespace holds this many vectors of one length... */
  cellsFrom: 65536,
  /** ...this many of them (at most MAX_CELLS)... */
  cells: 1024,
  /**
   * ...and a namespace-wide search ranks the codes of the nearest cells, this share at least
   * (recall@10 at 1,000,000: 0.965 at 8%, 0.974 at 10%, for 0.35 ms more; bench/notes.md).
   */
  probe: 0.1,
};

/** The memory is compacted once at least this many bytes (and more than are used) are left behind (tests: 0). */
export const compaction = { from: 1 << 20 };

const MAX_CELLS = 4096;
const PAGE = 65536;
const align = (n: number, to: number) => Math.ceil(n / to) * to;
/** Most bytes one space's memory may take (WebAssembly memory is at most 4 GiB). */
const MAX_BYTES = 3.5 * 1024 ** 3;
/** The mean the codes are taken against is recomputed (and every code redone) at these sizes. */
const RECENTER = [256, 1024, 4096, 16384, 65536];

/** A vector the codes cannot hold (another length, or memory is full): scored in JS. */
type Odd = { entity: string; v: Float32Array };

/**
 * A memory's stored vector (normalised float32 bytes), or undefined when it has none now. The
 * bytes are copied at once: they may be a reused buffer (lmdb-js's).
 */
export type ReadVector = (id: string, entity: string, row: number) => Uint8Array | undefined;

/**
 * What a caller keeps per row beside the codes (both backends: a 4-bit copy of each vector,
 * four-bit.ts): told when a row is written and when the last row moves into a hole.
 */
export interface RowKeeper {
  put(row: number, v: Float32Array): void;
  move(from: number, to: number): void;
  /** When given, scores the codes' candidates against q itself (instead of `read` and dot.ts). */
  dot?(row: number, q: Float32Array): number;
  /** What it holds, in bytes (for the search-memory budget). */
  heldBytes?(): number;
  /** Copies of what it holds for rows 0..rows-1, for a snapshot (VectorSpace.freeze). */
  freeze?(rows: number): ArrayBufferView[];
  /**
   * Takes back what `freeze` gave, for `rows` rows (the arrays may be used as they are); false
   * when they do not fit.
   */
  thaw?(sections: Uint8Array<ArrayBuffer>[], rows: number): boolean;
}

/** A space as of one moment, for a snapshot: its sizes and names, and its arrays' copies. */
export interface FrozenVectors {
  header: VectorHeader;
  /**
   * In order: the kernel's memory compacted (below the heap, then the centres' codes, then each
   * cell's codes or the rows' codes, packed), rowEntity, sum, cellOf, placeOf, cellLen, cellAt
   * and cellRoom (in the compacted memory), every cell's rows, the ids' words, UUID flags and
   * table (row-ids.ts), then its keeper's, from `keeperAt` on.
   */
  sections: ArrayBufferView[];
  keeperAt: number;
}

/** A frozen space's scalars and names (JSON). */
export interface VectorHeader {
  dims: number;
  rows: number;
  codes: boolean;
  offsets: number[];
  capacity: number;
  added: number;
  centred: number;
  cells: number;
  entityNames: string[];
  odd: [string, string, number[]][];
  /** The layout of the sections (thaw refuses another). */
  format: number;
  /** Rows whose id is not a UUID, with it (the others are 4 words each in their section). */
  otherIds: [number, string][];
}

/**
 * The layout of a frozen space's sections (a snapshot of another is not read). 3: the kernel's
 * memory compacted (each block's codes only, no room or holes: a third of what 2 held at
 * 1,000,000, from a load) and the ids' table.
 */
const VECTOR_FORMAT = 3;

/** The scalar offsets a frozen space keeps, in this order. */
const OFFSETS = ["vAt", "meanAt", "centresAt", "centresRoom", "heap", "top", "wasted", "rowAt", "rowRoom"] as const;

/** Small deterministic generator (xorshift32), for picking cell centres (and a first load's sample). */
export const xorshift = (seed: number) => () => {
  seed ^= seed << 13;
  seed ^= seed >>> 17;
  seed ^= seed << 5;
  return (seed >>> 0) / 4294967296;
};

/**
 * Exact scoring of candidates, shared by every space (searches run one at a time): the query at
 * 0, then candidate rows of `stride` floats (dims padded to a multiple of 8 with zeros), then
 * their scores.
 */
const BATCH = 4096;
let rescorer: DotKernel | undefined;
function rescoring(stride: number): DotKernel {
  rescorer ??= dotKernel();
  const need = (BATCH + 1) * stride * 4 + BATCH * 4;
  const have = rescorer.memory.buffer.byteLength;
  if (need > have) rescorer.memory.grow(Math.ceil((need - have) / PAGE));
  return rescorer;
}

const dot = (a: Float32Array, b: Float32Array) => {
  let s = 0;
  for (let j = 0; j < a.length; j++) s += a[j] * b[j];
  return s;
};

/**
 * Candidates of a search with their similarity; `all` when every vector of the scope is among
 * them; `byRead` when every similarity is of `read`'s vectors (else the keeper's approximation).
 */
export type Nearest = { ids: string[]; sims: Float32Array; all: boolean; byRead: boolean };

/**
 * One namespace's vectors: a code per row, plus any of other lengths. Codes live in blocks of the
 * kernel's memory: one block of every row's code, in row order, until cells are made; then one
 * block per cell, so the cells a search ranks are read front to back (reading codes scattered
 * over the memory measured ~20× slower: a cache and TLB miss each). A block that fills moves to a
 * twice larger one at the top; the memory is compacted once more of it is left behind than used.
 */
export class VectorSpace {
  private kernel: HammingKernel | undefined;
  private dims = 0;
  private bytes = 0; // of one code
  private padded = 0; // dims rounded up to a multiple of 32
  // Byte offsets: the query's code at 0 (also where a new code is made), a vector and the mean
  // (float32, `padded` long), then the blocks from `heap` to `top` (row codes, or the cells'
  // codes and their centres' codes), then scratch for a search (distances, addresses).
  private vAt = 0;
  private meanAt = 0;
  private centresAt = 0;
  private centresRoom = 0; // in codes
  private heap = 0;
  private top = 0;
  private wasted = 0;
  /** Views of the kernel's memory (remade when it grows). */
  private u8 = new Uint8Array(0);
  private f32 = new Float32Array(0);
  private i32 = new Int32Array(0);
  /** Room in the per-row arrays. */
  private capacity = 0;
  /** The block of row codes (before cells): its offset and room, in rows. */
  private rowAt = 0;
  private rowRoom = 0;
  rows = 0;
  private rowEntity = new Int32Array(0);
  private readonly entityNames: string[] = [];
  private readonly entityIndex = new Map<string, number>();
  /** Each row's id, and the row of an id (row-ids.ts). */
  private rowIds = new RowIds();
  /**
   * Each entity's rows. Made on first use after a thaw (a million Set entries take a second: the
   * first namespace-wide search after a restart does not wait for them); until then undefined,
   * and rowEntity alone says it.
   */
  private rowsOf: Map<number, Set<number>> | undefined = new Map();
  private readonly odd = new Map<string, Odd>();
  /** Sum and count of every vector added while a recentring is left: the mean codes are taken against. */
  private sum = new Float64Array(0);
  private added = 0;
  private centred = 0; // how many RECENTER steps were taken
  // Cells (none until ann.cellsFrom rows): each row's cell and place in it; each cell's rows,
  // and its block of codes (offset, room in rows).
  private cells = 0;
  private cellOf = new Int32Array(0);
  private placeOf = new Int32Array(0);
  private cellRows: Int32Array[] = [];
  private cellLen = new Int32Array(0);
  private cellAt = new Int32Array(0);
  private cellRoom = new Int32Array(0);
  /** Scratch: the row of each code a namespace-wide search ranks. */
  private probeIndex = new Int32Array(0);

  constructor(
    private readonly read: ReadVector,
    private readonly keeper?: RowKeeper,
  ) {}

  /** How many vectors of the codes' length the scope holds (a namespace's when `entity` is undefined). */
  scopeSize(entity: string | undefined): number {
    if (entity === undefined) return this.rows;
    const e = this.entityIndex.get(entity);
    return e === undefined ? 0 : (this.byEntity.get(e)?.size ?? 0);
  }

  /** Each entity's rows (made now if a thaw left them to be made). */
  private get byEntity(): Map<number, Set<number>> {
    if (this.rowsOf === undefined) {
      const m = new Map<number, Set<number>>();
      for (let r = 0; r < this.rows; r++) {
        const e = this.rowEntity[r];
        let set = m.get(e);
        if (!set) {
          set = new Set();
          m.set(e, set);
        }
        set.add(r);
      }
      this.rowsOf = m;
    }
    return this.rowsOf;
  }

  /** The row of `id`'s vector: -2 when it is of another length than the codes', -1 when it has none. */
  rowOfId(id: string): number {
    const r = this.rowIds.find(id);
    return r >= 0 ? r : this.odd.has(id) ? -2 : -1;
  }

  /** Row r's id. */
  idAt(r: number): string {
    return this.rowIds.idAt(r);
  }

  /** The ids of its vectors of another length than the codes'. */
  oddIds(): string[] {
    return [...this.odd.keys()];
  }

  /** How many vectors it holds. */
  get size() {
    return this.rows + this.odd.size;
  }

  /**
   * What it holds in memory, in bytes, for the search-memory budget (an estimate): the kernel's
   * memory (codes, cells), the per-row arrays, each row's id and map entries, vectors of another
   * length, and its keeper's.
   */
  heldBytes(): number {
    let n = 2048 + (this.kernel?.memory.buffer.byteLength ?? 0) + this.sum.byteLength + this.probeIndex.byteLength;
    n += this.rowEntity.byteLength + this.cellOf.byteLength + this.placeOf.byteLength;
    for (const rows of this.cellRows) n += rows.byteLength;
    n += this.rows * 200 + this.entityNames.length * 150;
    for (const o of this.odd.values()) n += o.v.byteLength + 200;
    return n + (this.keeper?.heldBytes?.() ?? 0);
  }

  /**
   * Copies of everything it holds, as of now (synchronous: the space may change right after), for
   * a snapshot that `thaw` takes back. Undefined when its keeper cannot be frozen.
   */
  freeze(): FrozenVectors | undefined {
    const keeper = this.keeper;
    if (keeper && !keeper.freeze) return undefined;
    const rows = this.rows;
    const me = this as unknown as Record<string, number>;
    const header: VectorHeader = {
      dims: this.dims,
      rows,
      codes: this.kernel !== undefined,
      offsets: OFFSETS.map((k) => me[k]),
      capacity: this.capacity,
      added: this.added,
      centred: this.centred,
      cells: this.cells,
      entityNames: [...this.entityNames],
      odd: [...this.odd].map(([id, o]) => [id, o.entity, Array.from(o.v)]),
      format: VECTOR_FORMAT,
      otherIds: [],
    };
    const ids = this.rowIds.freeze(rows);
    header.otherIds = ids.other;
    const cellRows = new Int32Array(this.cells > 0 ? rows : 0);
    for (let c = 0, at = 0; c < this.cells; c++) {
      cellRows.set(this.cellRows[c].subarray(0, this.cellLen[c]), at);
      at += this.cellLen[c];
    }
    // The kernel's memory without room or holes (thaw lays the blocks out with room again).
    const b = this.bytes;
    const blocks: [from: number, length: number][] = [];
    if (this.cells > 0) {
      blocks.push([this.centresAt, this.centresRoom]);
      for (let c = 0; c < this.cells; c++) blocks.push([this.cellAt[c], this.cellLen[c]]);
    } else if (this.rowRoom > 0) blocks.push([this.rowAt, rows]);
    let size = this.heap;
    for (const [, n] of blocks) size = align(size + n * b, 16);
    const memory = new Uint8Array(this.kernel ? size : 0);
    const placed: number[] = [];
    if (this.kernel) {
      memory.set(this.u8.subarray(0, this.heap));
      let at = this.heap;
      for (const [from, n] of blocks) {
        memory.set(this.u8.subarray(from, from + n * b), at);
        placed.push(at);
        at = align(at + n * b, 16);
      }
      const compact: Record<(typeof OFFSETS)[number], number> = {
        vAt: this.vAt,
        meanAt: this.meanAt,
        centresAt: this.cells > 0 ? placed[0] : this.centresAt,
        centresRoom: this.cells > 0 ? this.centresRoom : 0,
        heap: this.heap,
        top: size,
        wasted: 0,
        rowAt: this.cells > 0 ? 0 : (placed[0] ?? 0),
        rowRoom: this.cells > 0 ? 0 : rows,
      };
      header.offsets = OFFSETS.map((k) => compact[k]);
    }
    const sections: ArrayBufferView[] = [
      memory,
      this.rowEntity.slice(0, rows),
      this.sum.slice(),
      this.cells > 0 ? this.cellOf.slice(0, rows) : new Int32Array(0),
      this.cells > 0 ? this.placeOf.slice(0, rows) : new Int32Array(0),
      this.cellLen.slice(0, this.cells),
      Int32Array.from(placed.slice(1)),
      this.cellLen.slice(0, this.cells),
      cellRows,
      ids.words,
      ids.uuid,
      ids.table,
    ];
    const keeperAt = sections.length;
    sections.push(...(keeper?.freeze?.(rows) ?? []));
    return { header, sections, keeperAt };
  }

  /**
   * A space of what `freeze` gave (`sections` in its order, 8-byte aligned), with `read` and
   * `keeper` as the constructor takes them; undefined when they do not fit together.
   */
  static thaw(
    header: VectorHeader,
    sections: Uint8Array<ArrayBuffer>[],
    read: ReadVector,
    keeper?: RowKeeper,
  ): VectorSpace | undefined {
    const s = new VectorSpace(read, keeper);
    const i32 = (k: number) => {
      const b = sections[k] ?? new Uint8Array(0);
      return new Int32Array(b.buffer, b.byteOffset, b.byteLength / 4);
    };
    const { rows, cells, dims } = header;
    if (header.format !== VECTOR_FORMAT || i32(1).length !== rows) return undefined;
    const ids = RowIds.thaw(i32(9), sections[10] ?? new Uint8Array(0), i32(11), header.otherIds, rows);
    if (!ids) return undefined;
    s.rowIds = ids;
    if (header.codes) {
      s.init(dims);
      const me = s as unknown as Record<string, number>;
      OFFSETS.forEach((k, i) => {
        me[k] = header.offsets[i];
      });
      Object.assign(s, { rows, cells });
      // The blocks laid out again with room (a quarter more), as makeCells lays them out.
      const memory = sections[0];
      const b = s.bytes;
      const copies: [from: number, to: number, bytes: number][] = [];
      let at = s.heap;
      const place = (from: number, n: number, room: number) => {
        copies.push([from, at, n * b]);
        const to = at;
        at = align(at + room * b, 16);
        return to;
      };
      if (cells > 0) {
        s.centresAt = place(s.centresAt, s.centresRoom, s.centresRoom);
        const len = i32(5);
        const from = i32(6);
        if (len.length !== cells || from.length !== cells) return undefined;
        s.cellLen = len.slice();
        s.cellAt = new Int32Array(cells);
        s.cellRoom = new Int32Array(cells);
        for (let c = 0; c < cells; c++) {
          s.cellRoom[c] = Math.max(16, Math.ceil(len[c] * 1.25));
          s.cellAt[c] = place(from[c], len[c], s.cellRoom[c]);
        }
      } else if (s.rowRoom > 0) {
        s.rowRoom = Math.max(64, Math.ceil(rows * 1.25));
        s.rowAt = place(s.rowAt, rows, s.rowRoom);
      }
      s.top = at;
      s.wasted = 0;
      if (memory.length < s.heap || copies.some(([from, , n]) => from + n > memory.length) || !s.fits(0))
        return undefined;
      s.u8.set(memory.subarray(0, s.heap));
      for (const [from, to, n] of copies) s.u8.set(memory.subarray(from, from + n), to);
      const sum = sections[2];
      s.sum = new Float64Array(sum.buffer.slice(sum.byteOffset, sum.byteOffset + sum.byteLength));
    } else s.dims = dims;
    // (Room for a quarter more: the first rows a catching up adds do not copy every per-row array.)
    s.capacity = Math.max(header.capacity, Math.ceil(rows * 1.25));
    s.rowIds.reserve(s.capacity);
    s.rowEntity = new Int32Array(s.capacity);
    s.rowEntity.set(i32(1));
    s.added = header.added;
    s.centred = header.centred;
    s.rows = rows;
    if (cells > 0) {
      s.cellOf = new Int32Array(s.capacity);
      s.cellOf.set(i32(3));
      s.placeOf = new Int32Array(s.capacity);
      s.placeOf.set(i32(4));
      if (!header.codes) return undefined;
      const all = i32(8);
      s.cellRows = [];
      for (let c = 0, at = 0; c < cells; c++) {
        const list = new Int32Array(s.cellRoom[c]);
        list.set(all.subarray(at, at + s.cellLen[c]));
        s.cellRows.push(list);
        at += s.cellLen[c];
      }
    }
    header.entityNames.forEach((name, e) => {
      s.entityNames.push(name);
      s.entityIndex.set(name, e);
    });
    s.rowsOf = undefined;
    for (const [id, entity, v] of header.odd) s.odd.set(id, { entity, v: Float32Array.from(v) });
    if (keeper?.thaw?.(sections.slice(12), rows) === false) return undefined;
    return s;
  }

  /** Sets (v given) or removes a memory's vector. */
  set(id: string, entity: string, v: Float32Array | undefined) {
    this.remove(id);
    if (v === undefined) return;
    // (The codes are made once there are more rows than a search scores whole: makeCodes.)
    if (this.rows === 0 && this.dims === 0 && v.length > 0) this.dims = v.length;
    const codes = this.kernel !== undefined;
    if (v.length !== this.dims || (codes && !this.fits(this.bytes * 2))) {
      this.odd.set(id, { entity, v: Float32Array.from(v) });
      return;
    }
    const r = this.rows++;
    this.reserveRows(this.rows);
    if (codes) {
      this.encode(v, 0);
      if (this.cells > 0) this.assign(r);
      else {
        if (r === this.rowRoom) this.growRowBlock();
        this.u8.copyWithin(this.rowAt + r * this.bytes, 0, this.bytes);
      }
      // (Once no recentring is left, the mean is fixed: nothing to sum.)
      if (this.centred < RECENTER.length) {
        for (let j = 0; j < v.length; j++) this.sum[j] += v[j];
        this.added++;
      }
    }
    this.rowIds.set(r, id);
    this.keeper?.put(r, v);
    let e = this.entityIndex.get(entity);
    if (e === undefined) {
      e = this.entityNames.push(entity) - 1;
      this.entityIndex.set(entity, e);
    }
    this.rowEntity[r] = e;
    if (this.rowsOf) {
      let rows = this.rowsOf.get(e);
      if (!rows) {
        rows = new Set<number>();
        this.rowsOf.set(e, rows);
      }
      rows.add(r);
    }
    if (!codes) {
      if (this.rows > ann.rescore) this.makeCodes();
      return;
    }
    if (this.centred < RECENTER.length && this.rows >= RECENTER[this.centred]) this.recentre();
    if (this.cells === 0 && this.rows >= ann.cellsFrom) this.makeCells();
  }

  /**
   * The codes of every row, once there are more than a search scores whole (`ann.rescore`): until
   * then a namespace holds no kernel, no memory of its own for codes (a WebAssembly page, 64 KiB,
   * at least) and no mean, only its rows' ids (and its keeper's copy), so a small namespace costs
   * memory in proportion to its vectors. The mean is that of the rows there now (`read`'s vectors).
   */
  private makeCodes() {
    this.init(this.dims);
    while (this.rowRoom < this.rows) this.growRowBlock();
    for (let r = 0; r < this.rows; r++) {
      const b = this.read(this.rowIds.idAt(r), this.entityNames[this.rowEntity[r]], r);
      if (b?.length !== this.dims * 4) continue;
      const v = new Float32Array(b.slice().buffer);
      for (let j = 0; j < this.dims; j++) this.sum[j] += v[j];
      this.added++;
    }
    // The recentring steps passed so far, the last taken now (every row's code against the mean;
    // before the first step, a recentring that does not count as one).
    let k = 0;
    while (k < RECENTER.length && this.rows >= RECENTER[k]) k++;
    this.centred = k - 1;
    this.recentre();
    if (this.cells === 0 && this.rows >= ann.cellsFrom) this.makeCells();
  }

  /**
   * Before any vector is set (a first load of a namespace of at least `ann.cellsFrom` vectors):
   * the mean the codes are taken against and the cells' centres, taken from a sample of the whole
   * namespace, and room for `expected` rows. A load in key order (LMDB: by entity) would take them
   * from its first entities' vectors, which share topics in real data. No recentring after it.
   * Without centres (a namespace expected below `ann.cellsFrom`): the mean only, and no
   * recentring either (the sample's mean is the whole namespace's; each step would read every
   * vector again, the last at ann.cellsFrom rows; a namespace loaded past it keeps its sample's
   * mean as well).
   */
  prime(mean: Float64Array, centres: Float32Array[], expected: number) {
    const usable = centres.filter((c) => c.length === mean.length);
    if (this.size > 0 || this.dims !== 0 || mean.length === 0) return;
    if (usable.length === 0 && expected >= ann.cellsFrom) return;
    this.init(mean.length);
    for (let j = 0; j < this.dims; j++) this.f32[this.meanAt / 4 + j] = mean[j];
    this.centred = RECENTER.length;
    if (usable.length === 0) {
      this.rowRoom = Math.max(64, Math.ceil(expected * 1.25));
      this.rowAt = this.allocate(this.rowRoom);
      this.reserveRows(expected);
      return;
    }
    const k = Math.min(MAX_CELLS, ann.cells, usable.length);
    this.centresAt = this.allocate(k);
    this.centresRoom = k;
    for (let c = 0; c < k; c++) this.encode(usable[c], this.centresAt + c * this.bytes);
    const room = Math.max(16, Math.ceil((expected / k) * 1.25));
    const cellAt = new Int32Array(k);
    const cellRoom = new Int32Array(k).fill(room);
    for (let c = 0; c < k; c++) cellAt[c] = this.allocate(room);
    const cellRows = Array.from({ length: k }, () => new Int32Array(room));
    Object.assign(this, { cells: k, cellRows, cellLen: new Int32Array(k), cellAt, cellRoom, rowRoom: 0 });
    this.cellOf = new Int32Array(this.capacity);
    this.placeOf = new Int32Array(this.capacity);
    this.reserveRows(expected);
  }

  private remove(id: string) {
    this.odd.delete(id);
    const r = this.rowIds.find(id);
    if (r < 0) return;
    this.rowIds.delete(r);
    const e = this.rowEntity[r];
    const rows = this.rowsOf?.get(e);
    rows?.delete(r);
    if (rows?.size === 0) this.rowsOf!.delete(e);
    if (this.cells > 0) this.unassign(r);
    // The last row moves into the hole, so rows stay dense (with cells its code stays put).
    const last = --this.rows;
    if (r !== last) {
      this.keeper?.move(last, r);
      this.rowIds.move(last, r);
      this.rowEntity[r] = this.rowEntity[last];
      const its = this.rowsOf?.get(this.rowEntity[r]);
      its?.delete(last);
      its?.add(r);
      if (this.cells > 0) {
        const c = this.cellOf[last];
        this.cellOf[r] = c;
        this.placeOf[r] = this.placeOf[last];
        this.cellRows[c][this.placeOf[r]] = r;
      } else if (this.kernel)
        this.u8.copyWithin(
          this.rowAt + r * this.bytes,
          this.rowAt + last * this.bytes,
          this.rowAt + (last + 1) * this.bytes,
        );
    }
  }

  private init(dims: number) {
    this.dims = dims;
    this.padded = align(dims, 32);
    this.bytes = Math.ceil(dims / 64) * 8;
    this.kernel = hammingKernel(this.bytes / 8);
    this.vAt = align(this.bytes, 64);
    this.meanAt = this.vAt + this.padded * 4;
    this.heap = align(this.meanAt + this.padded * 4, 64);
    this.top = this.heap;
    this.sum = new Float64Array(dims);
    this.views();
  }

  private views() {
    const b = this.kernel!.memory.buffer;
    this.u8 = new Uint8Array(b);
    this.f32 = new Float32Array(b);
    this.i32 = new Int32Array(b);
  }

  /** Whether `more` bytes above the top (and scratch for every row) fit; grows the memory to hold them. */
  private fits(more: number): boolean {
    const need = this.top + more + (this.rows + 1) * 8 + this.cells * 8 + 64;
    if (need > MAX_BYTES) return false;
    const have = this.kernel!.memory.buffer.byteLength;
    if (need > have) {
      this.kernel!.memory.grow(Math.ceil((Math.max(need, Math.min(have * 1.5, MAX_BYTES)) - have) / PAGE));
      this.views();
    }
    return true;
  }

  /** A new block of `rows` codes at the top. */
  private allocate(rows: number): number {
    const at = this.top;
    this.fits(rows * this.bytes);
    this.top = align(at + rows * this.bytes, 16);
    return at;
  }

  private reserveRows(n: number) {
    if (n <= this.capacity) return;
    const capacity = Math.max(n, Math.min(this.capacity * 2 || 64, this.capacity + 262144));
    const grow = (a: Int32Array) => {
      const b = new Int32Array(capacity);
      b.set(a);
      return b;
    };
    this.rowEntity = grow(this.rowEntity);
    this.rowIds.reserve(capacity);
    if (this.cells > 0) {
      this.cellOf = grow(this.cellOf);
      this.placeOf = grow(this.placeOf);
    }
    this.capacity = capacity;
  }

  private growRowBlock() {
    const room = Math.max(64, this.rowRoom * 2);
    const at = this.allocate(room);
    this.u8.copyWithin(at, this.rowAt, this.rowAt + this.rows * this.bytes);
    this.wasted += this.rowRoom * this.bytes;
    this.rowAt = at;
    this.rowRoom = room;
    this.compactIfWasteful();
  }

  /** Where row r's code is. */
  private codeAt(r: number): number {
    return this.cells > 0 ? this.cellAt[this.cellOf[r]] + this.placeOf[r] * this.bytes : this.rowAt + r * this.bytes;
  }

  /** Scratch above the top: `count` distances, then `count` addresses. */
  private scratch(count: number) {
    this.fits(count * 8);
    const out = align(this.top, 64);
    return { out, at: out + count * 4 };
  }

  /** Slides the live blocks down over what was left behind (each only moves down, in address order). */
  private compactIfWasteful() {
    const live = this.cells > 0 ? this.top - this.heap - this.wasted : this.rowRoom * this.bytes;
    if (this.wasted === 0 || this.wasted < Math.max(live, compaction.from)) return;
    const blocks: [number, number, (at: number) => void][] = [];
    if (this.cells > 0) {
      for (let c = 0; c < this.cells; c++)
        blocks.push([this.cellAt[c], this.cellRoom[c] * this.bytes, (at) => (this.cellAt[c] = at)]);
      blocks.push([this.centresAt, this.centresRoom * this.bytes, (at) => (this.centresAt = at)]);
    } else blocks.push([this.rowAt, this.rowRoom * this.bytes, (at) => (this.rowAt = at)]);
    blocks.sort((a, b) => a[0] - b[0]);
    let to = this.heap;
    for (const [from, size, moved] of blocks) {
      if (from !== to) this.u8.copyWithin(to, from, from + size);
      moved(to);
      to = align(to + size, 16);
    }
    this.top = to;
    this.wasted = 0;
  }

  /** Writes v's code at byte `at`: bit j set when v[j] is above the mean. */
  private encode(v: Float32Array, at: number) {
    this.f32.set(v, this.vAt / 4);
    this.kernel!.encode(this.vAt, this.meanAt, this.padded, at);
  }

  /** Writes the code of stored bytes (float32) at byte `at`. */
  private encodeBytes(b: Uint8Array, at: number) {
    this.u8.set(b, this.vAt);
    this.kernel!.encode(this.vAt, this.meanAt, this.padded, at);
  }

  /** Each row's code again against the mean so far, from its stored vector (kept if it has none now). */
  private recentre() {
    this.centred++;
    for (let j = 0; j < this.dims; j++) this.f32[this.meanAt / 4 + j] = this.sum[j] / this.added;
    for (let r = 0; r < this.rows; r++) {
      const b = this.read(this.rowIds.idAt(r), this.entityNames[this.rowEntity[r]], r);
      if (b?.length === this.dims * 4) this.encodeBytes(b, this.codeAt(r));
    }
    if (this.cells > 0) this.makeCells();
  }

  /**
   * Picks cell centres among the rows (deterministically), puts every row in the cell whose
   * centre's code is nearest, and lays each cell's codes out in a block of its own.
   */
  private makeCells() {
    const k = Math.min(MAX_CELLS, ann.cells, this.rows);
    const pick = xorshift(0x9e3779b9);
    const chosen = new Set<number>();
    while (chosen.size < k) chosen.add(Math.floor(pick() * this.rows));
    if (this.centresRoom < k) {
      this.wasted += this.centresRoom * this.bytes;
      this.centresAt = this.allocate(k);
      this.centresRoom = k;
    }
    let c = 0;
    for (const r of chosen) {
      const from = this.codeAt(r);
      this.u8.copyWithin(this.centresAt + c * this.bytes, from, from + this.bytes);
      c++;
    }
    // Every row's cell, then the blocks (the old ones are left behind).
    const cellOf = new Int32Array(this.capacity);
    const counts = new Int32Array(k);
    for (let r = 0; r < this.rows; r++) {
      const from = this.codeAt(r);
      this.u8.copyWithin(0, from, from + this.bytes);
      cellOf[r] = this.nearestCentre(k);
      counts[cellOf[r]]++;
    }
    const cellAt = new Int32Array(k);
    const cellRoom = new Int32Array(k);
    for (let c = 0; c < k; c++) {
      cellRoom[c] = Math.max(16, Math.ceil(counts[c] * 1.25));
      cellAt[c] = this.allocate(cellRoom[c]);
    }
    const placeOf = new Int32Array(this.capacity);
    const cellRows = Array.from({ length: k }, (_, c) => new Int32Array(cellRoom[c]));
    const cellLen = new Int32Array(k);
    for (let r = 0; r < this.rows; r++) {
      const c = cellOf[r];
      const p = cellLen[c]++;
      cellRows[c][p] = r;
      placeOf[r] = p;
      const from = this.codeAt(r);
      this.u8.copyWithin(cellAt[c] + p * this.bytes, from, from + this.bytes);
    }
    this.wasted += this.cells > 0 ? this.cellRoomBytes() : this.rowRoom * this.bytes;
    Object.assign(this, { cells: k, cellOf, placeOf, cellRows, cellLen, cellAt, cellRoom, rowRoom: 0 });
    this.compactIfWasteful();
  }

  private cellRoomBytes() {
    let n = 0;
    for (let c = 0; c < this.cells; c++) n += this.cellRoom[c] * this.bytes;
    return n;
  }

  /** The cell (of the first k) whose centre's code is nearest the code at 0. */
  private nearestCentre(k: number): number {
    const { out } = this.scratch(k);
    this.kernel!.scan(this.centresAt, k, out);
    const d = this.i32;
    const o = out / 4;
    let best = 0;
    for (let c = 1; c < k; c++) if (d[o + c] < d[o + best]) best = c;
    return best;
  }

  /** Puts row r, whose code is at 0, in its cell's block. */
  private assign(r: number) {
    const c = this.nearestCentre(this.cells);
    const n = this.cellLen[c];
    if (n === this.cellRoom[c]) {
      const room = this.cellRoom[c] * 2;
      const at = this.allocate(room);
      this.u8.copyWithin(at, this.cellAt[c], this.cellAt[c] + n * this.bytes);
      this.wasted += this.cellRoom[c] * this.bytes;
      this.cellAt[c] = at;
      this.cellRoom[c] = room;
      const list = new Int32Array(room);
      list.set(this.cellRows[c]);
      this.cellRows[c] = list;
    }
    this.u8.copyWithin(this.cellAt[c] + n * this.bytes, 0, this.bytes);
    this.cellRows[c][n] = r;
    this.cellLen[c] = n + 1;
    this.cellOf[r] = c;
    this.placeOf[r] = n;
    this.compactIfWasteful();
  }

  /** Takes row r out of its cell: the cell's last code (and row) fills its place. */
  private unassign(r: number) {
    const c = this.cellOf[r];
    const last = --this.cellLen[c];
    const p = this.placeOf[r];
    if (p === last) return;
    const moved = this.cellRows[c][last];
    this.cellRows[c][p] = moved;
    this.placeOf[moved] = p;
    const at = this.cellAt[c];
    this.u8.copyWithin(at + p * this.bytes, at + last * this.bytes, at + (last + 1) * this.bytes);
  }

  /**
   * At least `want` vectors of the scope nearest `q` (normalised), each with its similarity, and
   * every vector of another length (scored exactly). All the scope's vectors when it holds at most
   * `want`, scored with the vectors `read` gives; otherwise the nearest codes' rows, scored by the
   * keeper's `dot` when it has one (or with `read`'s when `byRead`).
   */
  nearest(entity: string | undefined, q: Float32Array, want: number, byRead = false): Nearest {
    const ids: string[] = [];
    const sims: number[] = [];
    let all = true;
    let viaRead = true;
    if (q.length === this.dims && this.rows > 0) {
      const e = entity === undefined ? undefined : this.entityIndex.get(entity);
      const scope = entity === undefined ? undefined : e === undefined ? undefined : this.byEntity.get(e);
      const n = entity === undefined ? this.rows : (scope?.size ?? 0);
      // (Without codes yet, every row is scored: there are at most ann.rescore.)
      if (n <= want || !this.kernel)
        this.rescore(scope ?? Array.from({ length: this.rows }, (_, r) => r), q, ids, sims);
      else {
        all = false;
        const rows = this.candidates(scope, q, want);
        const keeper = this.keeper;
        if (keeper?.dot && !byRead) {
          viaRead = false;
          for (const r of rows) {
            ids.push(this.rowIds.idAt(r));
            sims.push(keeper.dot(r, q));
          }
        } else this.rescore(rows, q, ids, sims);
      }
    }
    for (const [id, o] of this.odd) {
      if (o.v.length !== q.length || (entity !== undefined && o.entity !== entity)) continue;
      ids.push(id);
      sims.push(dot(o.v, q));
    }
    return { ids, sims: Float32Array.from(sims), all, byRead: viaRead };
  }

  /**
   * The similarity of each of `ids` to `q` (normalised) by the vectors `read` gives (LMDB: the
   * stored ones, so exact), or by its own vector for one of another length; NaN for an id
   * without a vector now.
   */
  score(ids: readonly string[], q: Float32Array): Float32Array {
    const out = new Float32Array(ids.length).fill(Number.NaN);
    const rows: number[] = [];
    const at = new Map<string, number>();
    ids.forEach((id, i) => {
      const r = this.rowIds.find(id);
      const o = this.odd.get(id);
      if (r >= 0 && q.length === this.dims) {
        rows.push(r);
        at.set(id, i);
      } else if (o && o.v.length === q.length) out[i] = dot(o.v, q);
    });
    const got: string[] = [];
    const sims: number[] = [];
    this.rescore(rows, q, got, sims);
    got.forEach((id, j) => {
      out[at.get(id)!] = sims[j];
    });
    return out;
  }

  /** Scores the rows against q with the vectors `read` gives (rows without one now are left out). */
  private rescore(rows: Iterable<number>, q: Float32Array, ids: string[], sims: number[]) {
    const stride = align(this.dims, 8);
    const k = rescoring(stride);
    new Float32Array(k.memory.buffer, 0, this.dims).set(q);
    const rowsAt = stride * 4;
    const outAt = rowsAt + BATCH * stride * 4;
    const batch: string[] = [];
    const flush = () => {
      k.dense(rowsAt, 0, stride * 4, batch.length, outAt);
      const out = new Float32Array(k.memory.buffer, outAt, batch.length);
      for (let i = 0; i < batch.length; i++) {
        ids.push(batch[i]);
        sims.push(out[i]);
      }
      batch.length = 0;
    };
    const u8 = new Uint8Array(k.memory.buffer);
    for (const r of rows) {
      const id = this.rowIds.idAt(r);
      const b = this.read(id, this.entityNames[this.rowEntity[r]], r);
      if (b?.length !== this.dims * 4) continue;
      u8.set(b, rowsAt + batch.length * stride * 4);
      batch.push(id);
      if (batch.length === BATCH) flush();
    }
    if (batch.length > 0) flush();
  }

  /** The `want` rows (of the scope: an entity's rows, or the namespace's) whose codes are nearest q's. */
  private candidates(scope: Set<number> | undefined, q: Float32Array, want: number): Int32Array {
    const kernel = this.kernel!;
    this.encode(q, 0);
    let count: number;
    let index: Int32Array | undefined; // the row of each distance (none: distance i is row i's)
    let out: number;
    if (scope) {
      count = scope.size;
      const s = this.scratch(count);
      out = s.out;
      index = new Int32Array(count);
      let i = 0;
      for (const r of scope) {
        index[i] = r;
        this.i32[s.at / 4 + i++] = this.codeAt(r);
      }
      kernel.gather(s.at, count, out);
    } else if (this.cells === 0) {
      count = this.rows;
      out = this.scratch(count).out;
      kernel.scan(this.rowAt, count, out);
    } else {
      // The nearest cells (by their centre's code) until they hold the share to rank, each
      // block read front to back. (Ranking cells by the centres' vectors measured no better.)
      const s = this.scratch(Math.max(this.rows, this.cells));
      out = s.out;
      kernel.scan(this.centresAt, this.cells, out);
      // By distance, then cell: each as distance × MAX_CELLS + cell, sorted as numbers (a
      // comparator sort of the cells took a fifth of a search at 300,000).
      const order = new Int32Array(this.cells);
      for (let c = 0; c < this.cells; c++) order[c] = this.i32[out / 4 + c] * MAX_CELLS + c;
      order.sort();
      const target = Math.max(want, Math.ceil(this.rows * ann.probe));
      count = 0;
      if (this.probeIndex.length < this.rows) this.probeIndex = new Int32Array(this.capacity);
      index = this.probeIndex;
      for (const key of order) {
        const c = key & (MAX_CELLS - 1);
        const n = this.cellLen[c];
        if (n === 0) continue;
        index.set(this.cellRows[c].subarray(0, n), count);
        kernel.scan(this.cellAt[c], n, out + count * 4);
        count += n;
        if (count >= target) break;
      }
    }
    const d = this.i32.subarray(out / 4, out / 4 + count);
    // The `want` smallest distances, by a histogram of them (they are 0..dims).
    const hist = new Int32Array(this.dims + 2);
    for (let i = 0; i < count; i++) hist[d[i]]++;
    let cut = 0;
    for (let seen = 0; cut <= this.dims; cut++) {
      seen += hist[cut];
      if (seen >= want) break;
    }
    // Those below the cut (fewer than `want`), then those at it until `want`, each in order: in
    // one pass, those at the cut kept aside (at most `want` of them).
    const chosen = new Int32Array(Math.min(want, count));
    const at = new Int32Array(chosen.length);
    let k = 0;
    let m = 0;
    for (let i = 0; i < count; i++) {
      const x = d[i];
      if (x < cut) chosen[k++] = index ? index[i] : i;
      else if (x === cut && m < at.length) at[m++] = index ? index[i] : i;
    }
    for (let j = 0; j < m && k < chosen.length; j++) chosen[k++] = at[j];
    return chosen.subarray(0, k);
  }
}
