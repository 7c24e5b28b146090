// A keyword space's document table: per document (numbered in the order added) its id, length,
// creation time, entity and its (list id, tf) pairs; the open-addressing table that finds a live
// document by its id; per entity its documents; per term its list (lists.ts). What changes it is
// in space.ts (add, remove, compaction), freezing it to a snapshot and reading one back in
// snapshot.ts; the searches (search.ts, walk.ts) read it.
// Nothing here is an object per document or per posting (issue 26: 1,000,000 memories took
// 991 MB of heap as JS objects): a document's id is 16 bytes (a UUID; any other id is kept
// aside: ids.ts); an entity's documents are one growing array.
import { hash, hex8, tableSize, type Words, words } from "./ids";
import { grown, type List } from "./lists";

/**
 * The documents of a keyword space and its lists by term. Its fields are the space's state,
 * written by space.ts and snapshot.ts only.
 */
export class DocumentTable {
  /** Documents numbered so far (gone ones included). */
  count = 0;
  /** Document number -> its id: 4 words of a UUID, or (any other id) zeros and an entry in `otherIds`. */
  idWords: Int32Array;
  otherIds: Map<number, string>;
  /** Open addressing (linear probing) over the live documents' ids: document + 1, 0 when empty. */
  table: Int32Array;
  /** Document number -> 1 once the document is gone. */
  gone: Uint8Array;
  /** Document number -> its length, creation time, entity, and where its list ids start in the pool. */
  docLen: Int32Array;
  docCreated: Float64Array;
  docEntity: Int32Array;
  docStart: Int32Array;
  /** The (list id, tf) pairs of every document, in document order, each number a varint (7 bits a byte, low first). */
  pool: Uint8Array;
  /** listsOf's answer: a document's list ids and tfs. */
  termIds: Int32Array;
  termTfs: Int32Array;
  /** Entities: names, and per entity its documents (gone ones included until compaction) and how many are live. */
  entityNames: string[];
  entityIndex: Map<string, number>;
  entityDocs: Int32Array[];
  entityCount: number[];
  entityLive: number[];
  /** Live documents, the sum of their lengths and of the lengths' squares. */
  live = 0;
  totalLength = 0;
  totalSquares = 0;
  lists: Map<string, List>;
  listById: List[];
  /**
   * Scratch for an entity's search: its candidates and their scores (made by its first entity
   * search, search.ts; until then the shared empty arrays, never written: issue 32's small
   * namespaces).
   */
  touched: Int32Array = NO_I32;
  values: Float64Array = NO_F64;
  dead = 0;
  /** Snapshots being written of it (freeze): no compaction meanwhile (it rewrites the lists in place). */
  frozen = 0;

  /**
   * Arrays with room for `room` documents (about 16 bytes of terms each); 0: none allocated, for
   * a packed space (space.ts), which uses none of them until it unpacks (a small namespace's
   * brought back and searched over and over: their garbage stayed in the process).
   */
  constructor(room = 4) {
    this.idWords = this.table = this.docLen = this.docEntity = this.docStart = NO_I32;
    this.termIds = this.termTfs = NO_I32;
    this.gone = this.pool = NO_U8;
    this.docCreated = NO_F64;
    // (Packed: shared empty ones that throw if written, 17 objects less a small namespace held:
    // issue 32, their cells scattered among the garbage of its build kept the heap's blocks.)
    this.otherIds = NO_MAP as Map<number, string>;
    this.entityIndex = NO_MAP as Map<string, number>;
    this.lists = NO_MAP as Map<string, List>;
    this.entityNames = NO_ARRAY as string[];
    this.entityDocs = NO_ARRAY as Int32Array[];
    this.entityCount = this.entityLive = NO_ARRAY as number[];
    this.listById = NO_ARRAY as List[];
    if (room) this.allocate(room);
  }

  /** Its arrays and maps, empty, with room for `room` documents (a packed space unpacking: space.ts). */
  protected allocate(room: number) {
    this.idWords = new Int32Array(room * 4);
    this.table = new Int32Array(tableSize(room));
    this.gone = new Uint8Array(room);
    this.docLen = new Int32Array(room);
    this.docCreated = new Float64Array(room);
    this.docEntity = new Int32Array(room);
    this.docStart = new Int32Array(room + 1);
    this.pool = new Uint8Array(room * 16);
    this.termIds = new Int32Array(16);
    this.termTfs = new Int32Array(16);
    this.otherIds = new Map();
    this.entityIndex = new Map();
    this.lists = new Map();
    this.entityNames = [];
    this.entityDocs = [];
    this.entityCount = [];
    this.entityLive = [];
    this.listById = [];
  }

  /** Live documents and their total length: BM25's N and average length over the namespace. */
  get stats(): { docs: number; totalLength: number } {
    return { docs: this.live, totalLength: this.totalLength };
  }

  /** A document's memory id ("" once gone). */
  idOf(d: number): string {
    if (this.gone[d]) return "";
    const other = this.otherIds.get(d);
    if (other !== undefined) return other;
    const w = this.idWords;
    const a = hex8(w[d * 4]);
    const b = hex8(w[d * 4 + 1]);
    const c = hex8(w[d * 4 + 2]);
    const e = hex8(w[d * 4 + 3]);
    return `${a}-${b.slice(0, 4)}-${b.slice(4)}-${c.slice(0, 4)}-${c.slice(4)}${e}`;
  }

  /** Whether document a's id sorts after document b's (as strings). */
  idAfter(a: number, b: number): boolean {
    if (this.otherIds.has(a) || this.otherIds.has(b)) return this.idOf(a) > this.idOf(b);
    const w = this.idWords;
    for (let i = 0; i < 4; i++) {
      const x = w[a * 4 + i] >>> 0;
      const y = w[b * 4 + i] >>> 0;
      if (x !== y) return x > y;
    }
    return false;
  }

  same(d: number, id: string, w: Words | undefined): boolean {
    if (!w) return this.otherIds.get(d) === id;
    const x = this.idWords;
    return (
      x[d * 4] === w[0] &&
      x[d * 4 + 1] === w[1] &&
      x[d * 4 + 2] === w[2] &&
      x[d * 4 + 3] === w[3] &&
      !this.otherIds.has(d)
    );
  }

  /** The table slot holding id, or the empty slot where it would go. */
  slot(id: string, w: Words | undefined): number {
    const mask = this.table.length - 1;
    for (let s = hash(id, w) & mask; ; s = (s + 1) & mask) {
      const v = this.table[s];
      if (v === 0 || this.same(v - 1, id, w)) return s;
    }
  }

  /** The live document of a memory id, if any. */
  docOf(id: string): number | undefined {
    const v = this.table[this.slot(id, words(id))];
    return v === 0 ? undefined : v - 1;
  }

  /** The table hash of document d's id (as hash() of it). */
  hashOf(d: number): number {
    if (this.otherIds.size > 0) {
      const other = this.otherIds.get(d);
      if (other !== undefined) return hash(other, undefined);
    }
    const x = this.idWords;
    return Math.imul(x[d * 4 + 3] ^ Math.imul(x[d * 4 + 2], 0x9e3779b1) ^ x[d * 4], 0x85ebca6b);
  }

  /** Rebuilds the table for the live documents, at most half full. */
  rehash(size: number) {
    const n = tableSize(size);
    this.table = new Int32Array(n);
    const mask = n - 1;
    for (let d = 0; d < this.count; d++) {
      if (this.gone[d]) continue;
      let s = this.hashOf(d) & mask;
      while (this.table[s] !== 0) s = (s + 1) & mask;
      this.table[s] = d + 1;
    }
  }

  /** Removes the entry of slot s, shifting later entries of its run back (no tombstones). */
  unslot(s: number) {
    const t = this.table;
    const mask = t.length - 1;
    t[s] = 0;
    for (let j = (s + 1) & mask; t[j] !== 0; j = (j + 1) & mask) {
      const home = this.hashOf(t[j] - 1) & mask;
      // Move it back into s when s lies cyclically between its home and j.
      if ((j > s && (home <= s || home > j)) || (j < s && home <= s && home > j)) {
        t[s] = t[j];
        t[j] = 0;
        s = j;
      }
    }
  }

  /** The live documents of an entity (none: undefined). */
  entityDocuments(entity: string): { docs: Int32Array; live: number } | undefined {
    const e = this.entityIndex.get(entity);
    if (e === undefined || this.entityLive[e] === 0) return undefined;
    return { docs: this.entityDocs[e].subarray(0, this.entityCount[e]), live: this.entityLive[e] };
  }

  /** Decodes document d's (list id, tf) pairs into termIds and termTfs (valid until the next call); returns how many. */
  listsOf(d: number): number {
    const pool = this.pool;
    const end = this.docStart[d + 1];
    let n = 0;
    for (let k = this.docStart[d]; k < end; n++) {
      if (n === this.termIds.length) {
        this.termIds = grown(this.termIds, n + 1);
        this.termTfs = grown(this.termTfs, n + 1);
      }
      let id = 0;
      let b: number;
      for (let shift = 0; ; shift += 7) {
        b = pool[k++];
        id |= (b & 0x7f) << shift;
        if (b < 0x80) break;
      }
      let tf = 0;
      for (let shift = 0; ; shift += 7) {
        b = pool[k++];
        tf |= (b & 0x7f) << shift;
        if (b < 0x80) break;
      }
      this.termIds[n] = id;
      this.termTfs[n] = tf;
    }
    return n;
  }
}

/** A packed space's arrays (never written: of length 0). */
export const NO_I32 = new Int32Array(0);
export const NO_U8 = new Uint8Array(0);
export const NO_F64 = new Float64Array(0);
/** A packed space's maps and arrays until it unpacks: empty, and writing one throws. */
const NO_ARRAY = Object.freeze([]) as unknown as never[];
const NO_MAP = new Map<never, never>();
NO_MAP.set = () => {
  throw new Error("a packed keyword space's shared empty map was written");
};
