// A namespace's keyword lists in memory, and BM25 top-k over them: backend-neutral (no engine
// here). LMDB keeps one per namespace searched (lmdb/keyword-cache.ts builds and follows it from
// its sub-databases); PostgreSQL keeps one per replica and namespace (postgres/keyword-cache.ts,
// following the events table). The search checks every candidate through the caller's `accept`,
// so what it returns is whatever the caller's store holds as current and matching.
//
// Per term a list of (document, tf) in typed arrays, in document order, so a namespace-wide
// keyword search walks them side by side and skips what cannot reach the top (MaxScore).
// Document counts and lengths are summed here.
// Nothing here is an object per document or per posting (issue 26: 1,000,000 memories took
// 991 MB of heap as JS objects): a document's id is 16 bytes (a UUID; any other id is kept
// aside), found again through an open-addressing table; postings are 6 bytes (document, tf);
// an entity's documents are one growing array.
import { bm25, idf, type QueryTerm as Term } from "../text/scoring";
import { termCounts } from "../text/tokens";
import { lowerUuidPattern } from "../wire/schemas";
import type { MemoryRecord } from "./records";
import type { MemoryScope, Scored } from "./storage";

type Typed = Int32Array | Uint16Array | Uint8Array | Float64Array;
/**
 * `a`, or a copy with room for `size` items: twice as long while small, an eighth longer once
 * large (a doubling would leave half of a big array unused: after a snapshot is read, the first
 * change copies each per-document array out of the mapped file).
 */
const grown = <T extends Typed>(a: T, size: number): T => {
  if (size <= a.length) return a;
  const more = a.length < 1 << 16 ? a.length : a.length >> 3;
  const b = new (a.constructor as new (n: number) => T)(Math.max(size, a.length + more));
  b.set(a);
  return b;
};
/** A copy of the first n items, without spare room. */
const trimmed = <T extends Typed>(a: T, n: number): T => {
  const b = new (a.constructor as new (n: number) => T)(n);
  b.set(a.subarray(0, n));
  return b;
};

/** Most a tf can be (more occurrences count as this many: BM25 saturates long before). */
const MAX_TF = 65535;

/** A list's skyline holds tfs 1 to SKY - 1 one by one, and the rest together (List.sky). */
const SKY = 8;
const NONE = 0x7fffffff;

const EMPTY_DOCS = new Int32Array(0);
const EMPTY_TFS = new Uint16Array(0);

/**
 * One term's postings, in insertion order; `live` counts those of documents not gone (its df).
 * (The document's length is read from the document: keeping it in each posting too measured no
 * faster, and took 2 more bytes a posting.) A list read from a snapshot is sealed: `doc` and `tf`
 * view the mapped file and are never written; postings pushed later go to a tail on the heap
 * (copying the mapped part out at the first push would put it all on the heap).
 */
export class List {
  /** Postings in all (doc/tf's, then the tail's). */
  n = 0;
  live = 0;
  doc = new Int32Array(2);
  tf = new Uint16Array(2);
  /** Sealed: postings pushed since, in tailDoc/tailTf (tailN of them); doc/tf hold n - tailN. */
  sealed = false;
  tailN = 0;
  tailDoc = EMPTY_DOCS;
  tailTf = EMPTY_TFS;
  /** The longest document ever pushed. */
  maxLen = 0;
  /**
   * For MaxScore's bound on what the term can add to a document's score (bm25 grows with tf and
   * falls with length): per tf 1 to SKY - 1 the shortest document with that tf, at SKY the
   * shortest with a tf of SKY or more (NONE: no such posting), and skyTf the highest tf. Made on
   * the list's first namespace search (KeywordSpace.skylineOf), then kept by push. Documents gone
   * since leave it as it was: a bound above the postings left, which is safe.
   */
  sky: Int32Array | undefined = undefined;
  skyTf = 0;
  constructor(readonly id: number) {}
  /** Notes a posting in the skyline. */
  noteSky(tf: number, len: number) {
    const sky = this.sky!;
    const t = Math.min(tf, SKY);
    if (len < sky[t]) sky[t] = len;
    if (tf > this.skyTf) this.skyTf = tf;
  }
  push(d: number, tf: number, len: number) {
    if (len > this.maxLen) this.maxLen = len;
    if (this.sky) this.noteSky(tf, len);
    if (this.sealed) {
      if (this.tailN === this.tailDoc.length) {
        this.tailDoc = grown(this.tailDoc, this.tailN + 8);
        this.tailTf = grown(this.tailTf, this.tailN + 8);
      }
      this.tailDoc[this.tailN] = d;
      this.tailTf[this.tailN++] = tf;
    } else {
      if (this.n === this.doc.length) {
        this.doc = grown(this.doc, this.n + 1);
        this.tf = grown(this.tf, this.n + 1);
      }
      this.doc[this.n] = d;
      this.tf[this.n] = tf;
    }
    this.n++;
    this.live++;
  }
  /** The i-th posting's document and tf (i < n). */
  docAt(i: number): number {
    const head = this.n - this.tailN;
    return i < head ? this.doc[i] : this.tailDoc[i - head];
  }
  tfAt(i: number): number {
    const head = this.n - this.tailN;
    return i < head ? this.tf[i] : this.tailTf[i - head];
  }
  /** Drops spare room (after a first load, when most lists stop growing). */
  trim() {
    if (this.sealed) {
      this.tailDoc = trimmed(this.tailDoc, this.tailN);
      this.tailTf = trimmed(this.tailTf, this.tailN);
    } else {
      this.doc = trimmed(this.doc, this.n);
      this.tf = trimmed(this.tf, this.n);
    }
  }
}

const UUID = new RegExp(lowerUuidPattern);
const hex8 = (n: number) => (n >>> 0).toString(16).padStart(8, "0");

/**
 * A namespace's postings. Document numbers are this process's own, in the order documents were
 * added (so every list holds its documents in ascending order); a changed memory gets a new one.
 * Per document: its (list id, tf) pairs, varint-encoded in one shared pool of bytes (to unlist it
 * when it goes, and for entity searches; a namespace search walks the lists only).
 */
export class KeywordSpace {
  /** Documents numbered so far (gone ones included). */
  count = 0;
  /** Document number -> its id: 4 words of a UUID, or (any other id) zeros and an entry in `otherIds`. */
  private idWords = new Int32Array(4096);
  private readonly otherIds = new Map<number, string>();
  /** Open addressing (linear probing) over the live documents' ids: document + 1, 0 when empty. */
  private table = new Int32Array(2048);
  /** Document number -> 1 once the document is gone. */
  gone = new Uint8Array(1024);
  /** Document number -> its length, creation time, entity, and where its list ids start in the pool. */
  docLen = new Int32Array(1024);
  docCreated = new Float64Array(1024);
  private docEntity = new Int32Array(1024);
  docStart = new Int32Array(1025);
  /** The (list id, tf) pairs of every document, in document order, each number a varint (7 bits a byte, low first). */
  pool = new Uint8Array(8192);
  /** listsOf's answer: a document's list ids and tfs. */
  termIds = new Int32Array(64);
  termTfs = new Int32Array(64);
  /** Entities: names, and per entity its documents (gone ones included until compaction) and how many are live. */
  private readonly entityNames: string[] = [];
  private readonly entityIndex = new Map<string, number>();
  private entityDocs: Int32Array[] = [];
  private entityCount: number[] = [];
  private entityLive: number[] = [];
  /** Live documents and the sum of their lengths. */
  private live = 0;
  private totalLength = 0;
  readonly lists = new Map<string, List>();
  private listById: List[] = [];
  /** Scratch for an entity's search: its candidates and their scores. */
  touched = new Int32Array(0);
  values = new Float64Array(0);
  private dead = 0;
  /** Snapshots being written of it (freeze): no compaction meanwhile (it rewrites the lists in place). */
  private frozen = 0;
  /** Compacts once more than this many documents (and more than half) are gone. */
  constructor(private readonly compactAfter = 10000) {}

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

  /** An id's 4 words (a UUID's), or undefined for any other id. */
  private static words(id: string): [number, number, number, number] | undefined {
    if (id.length !== 36 || !UUID.test(id)) return undefined;
    return [
      Number.parseInt(id.slice(0, 8), 16) | 0,
      Number.parseInt(id.slice(9, 13) + id.slice(14, 18), 16) | 0,
      Number.parseInt(id.slice(19, 23) + id.slice(24, 28), 16) | 0,
      Number.parseInt(id.slice(28, 36), 16) | 0,
    ];
  }

  private static hash(id: string, w: [number, number, number, number] | undefined): number {
    if (w) return Math.imul(w[3] ^ Math.imul(w[2], 0x9e3779b1) ^ w[0], 0x85ebca6b);
    let h = 0x811c9dc5;
    for (let i = 0; i < id.length; i++) h = Math.imul(h ^ id.charCodeAt(i), 16777619);
    return h;
  }

  private same(d: number, id: string, w: [number, number, number, number] | undefined): boolean {
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
  private slot(id: string, w: [number, number, number, number] | undefined): number {
    const mask = this.table.length - 1;
    for (let s = KeywordSpace.hash(id, w) & mask; ; s = (s + 1) & mask) {
      const v = this.table[s];
      if (v === 0 || this.same(v - 1, id, w)) return s;
    }
  }

  /** The live document of a memory id, if any. */
  docOf(id: string): number | undefined {
    const v = this.table[this.slot(id, KeywordSpace.words(id))];
    return v === 0 ? undefined : v - 1;
  }

  /** The table hash of document d's id (as hash() of it). */
  private hashOf(d: number): number {
    if (this.otherIds.size > 0) {
      const other = this.otherIds.get(d);
      if (other !== undefined) return KeywordSpace.hash(other, undefined);
    }
    const x = this.idWords;
    return Math.imul(x[d * 4 + 3] ^ Math.imul(x[d * 4 + 2], 0x9e3779b1) ^ x[d * 4], 0x85ebca6b);
  }

  /** The size of a table for `size` documents: a power of 2, at least twice as many. */
  private static tableSize(size: number) {
    let n = 2048;
    while (n < size * 2) n *= 2;
    return n;
  }

  /** Rebuilds the table for the live documents, at most half full. */
  private rehash(size: number) {
    const n = KeywordSpace.tableSize(size);
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
  private unslot(s: number) {
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

  /** Adds a memory from its terms (DocTerms: [length, createdAt, entity, term, tf, ...]). */
  add(id: string, v: DocTerms, isNew = false) {
    if (!isNew) this.remove(id);
    const entity = v[2] as string;
    const d = this.count++;
    const length = v[0] as number;
    // (Each array by its own length: they need not have grown in step, after a snapshot was read.)
    this.gone = grown(this.gone, d + 1);
    this.docLen = grown(this.docLen, d + 1);
    this.docCreated = grown(this.docCreated, d + 1);
    this.docEntity = grown(this.docEntity, d + 1);
    this.docStart = grown(this.docStart, d + 2);
    this.idWords = grown(this.idWords, (d + 1) * 4);
    const w = KeywordSpace.words(id);
    if (w) this.idWords.set(w, d * 4);
    else {
      this.idWords.fill(0, d * 4, d * 4 + 4);
      this.otherIds.set(d, id);
    }
    this.gone[d] = 0;
    if ((this.live + 1) * 2 > this.table.length) this.rehash(this.live + 1);
    this.table[this.slot(id, w)] = d + 1;
    this.live++;
    const start = this.docStart[d];
    this.pool = grown(this.pool, start + ((v.length - 3) / 2) * 8);
    const pool = this.pool;
    this.docLen[d] = length;
    this.totalLength += length;
    this.docCreated[d] = v[1] as number;
    let k = start;
    for (let i = 3; i < v.length; i += 2) {
      const term = v[i] as string;
      let l = this.lists.get(term);
      if (!l) {
        l = new List(this.listById.length);
        this.listById.push(l);
        this.lists.set(term, l);
      }
      let tf = Math.min(MAX_TF, v[i + 1] as number);
      l.push(d, tf, length);
      let id = l.id;
      for (; id >= 0x80; id >>>= 7) pool[k++] = (id & 0x7f) | 0x80;
      pool[k++] = id;
      for (; tf >= 0x80; tf >>>= 7) pool[k++] = (tf & 0x7f) | 0x80;
      pool[k++] = tf;
    }
    this.docStart[d + 1] = k;
    let e = this.entityIndex.get(entity);
    if (e === undefined) {
      e = this.entityNames.push(entity) - 1;
      this.entityIndex.set(entity, e);
      this.entityDocs.push(new Int32Array(4));
      this.entityCount.push(0);
      this.entityLive.push(0);
    }
    const n = this.entityCount[e]++;
    this.entityDocs[e] = grown(this.entityDocs[e], n + 1);
    this.entityDocs[e][n] = d;
    this.entityLive[e]++;
    this.docEntity[d] = e;
  }

  remove(id: string) {
    const w = KeywordSpace.words(id);
    const s = this.slot(id, w);
    if (this.table[s] === 0) return;
    const d = this.table[s] - 1;
    this.unslot(s);
    this.otherIds.delete(d);
    this.live--;
    this.gone[d] = 1;
    this.totalLength -= this.docLen[d];
    const n = this.listsOf(d);
    for (let i = 0; i < n; i++) this.listById[this.termIds[i]].live--;
    this.entityLive[this.docEntity[d]]--;
    if (++this.dead > this.compactAfter && this.dead > this.live && this.frozen === 0) this.compact();
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

  /** A list's skyline (List.sky), made from its live postings the first time it is asked for. */
  skylineOf(l: List): Int32Array {
    if (l.sky) return l.sky;
    l.sky = new Int32Array(SKY + 1).fill(NONE);
    l.skyTf = 0;
    const { gone, docLen } = this;
    const head = l.n - l.tailN;
    for (const [doc, tf, n] of [
      [l.doc, l.tf, head],
      [l.tailDoc, l.tailTf, l.tailN],
    ] as const)
      for (let i = 0; i < n; i++) {
        const d = doc[i];
        if (!gone[d]) l.noteSky(tf[i], docLen[d]);
      }
    return l.sky;
  }

  /**
   * Its live documents and lists as they are now, for a snapshot written over many turns while
   * the space goes on changing (keyword-snapshot.ts): what it writes is fixed here (the
   * documents and list lengths of this moment, gone ones left out and the rest renumbered, lists
   * left empty written without their term), and read later from arrays that only grow at their
   * end or are replaced by copies, except by a compaction, which waits for release().
   */
  freeze(): FrozenSpace {
    this.frozen++;
    const n = this.count;
    const { idWords, docLen, docCreated, docEntity, docStart, pool } = this;
    // Gone now (a copy: removals during the save do not change what it writes).
    const gone = this.dead > 0 ? this.gone.slice(0, n) : undefined;
    let renumber: Int32Array | undefined;
    let count = n;
    let poolBytes = docStart[n];
    if (gone) {
      renumber = new Int32Array(n);
      count = 0;
      poolBytes = 0;
      for (let d = 0; d < n; d++) {
        if (gone[d]) renumber[d] = -1;
        else {
          renumber[d] = count++;
          poolBytes += docStart[d + 1] - docStart[d];
        }
      }
    }
    const isLive = (d: number) => gone === undefined || gone[d] === 0;
    const newNumber = (d: number) => (renumber ? renumber[d] : d);
    // Entities with a live document, renumbered.
    const entityIdOf = new Int32Array(this.entityNames.length).fill(-1);
    const entities: string[] = [];
    for (let d = 0; d < n; d++) {
      if (gone?.[d]) continue;
      const e = docEntity[d];
      if (entityIdOf[e] < 0) entityIdOf[e] = entities.push(this.entityNames[e]) - 1;
    }
    const L = this.listById.length;
    // Each list's parts: doc/tf's postings, then the tail's (both only grow past these counts).
    const lists = this.listById.map((l) => ({
      live: l.live,
      parts: [
        { doc: l.doc, tf: l.tf, n: l.n - l.tailN },
        { doc: l.tailDoc, tf: l.tailTf, n: l.tailN },
      ],
    }));
    const terms: string[] = new Array(L).fill("");
    for (const [term, l] of this.lists) if (l.live > 0) terms[l.id] = term;
    const listN = new Int32Array(L);
    const listMaxLen = new Int32Array(L);
    let postings = 0;
    for (let i = 0; i < L; i++) {
      listN[i] = lists[i].live;
      listMaxLen[i] = this.listById[i].maxLen;
      postings += lists[i].live;
    }
    const otherIds: [number, string][] = [];
    for (const [d, id] of this.otherIds) if (d < n && isLive(d)) otherIds.push([newNumber(d), id]);
    // The id table: as it is (a copy: adds and removes change it in place), or, when documents
    // are renumbered, made for the new numbers while the pieces are written (as rehash makes it).
    const table = gone ? new Int32Array(KeywordSpace.tableSize(count)) : this.table.slice();
    const otherOf = gone ? new Map(this.otherIds) : undefined;
    let released = false;
    return {
      count,
      pool: poolBytes,
      postings,
      table: table.length,
      terms,
      entities,
      otherIds,
      *pieces(max: number): Generator<[number, Piece]> {
        const step = Math.max(1, max >> 4);
        /** A per-document section's pieces: `width` items per document, as `put` writes them. */
        function* perDoc<T extends Piece>(
          section: number,
          make: new (size: number) => T,
          width: number,
          same: T | undefined,
          put: (out: T, at: number, d: number) => void,
        ): Generator<[number, Piece]> {
          for (let a = 0; a < n; a += step) {
            const b = Math.min(n, a + step);
            if (same && !gone) {
              yield [section, same.subarray(a * width, b * width) as T];
              continue;
            }
            let live = 0;
            for (let d = a; d < b; d++) if (isLive(d)) live++;
            const out = new make(live * width);
            let k = 0;
            for (let d = a; d < b; d++) if (isLive(d)) put(out, k++ * width, d);
            yield [section, out];
          }
        }
        yield* perDoc(0, Int32Array, 4, idWords, (out, at, d) => out.set(idWords.subarray(d * 4, d * 4 + 4), at));
        yield* perDoc(1, Int32Array, 1, docLen, (out, at, d) => {
          out[at] = docLen[d];
        });
        yield* perDoc(2, Float64Array, 1, docCreated, (out, at, d) => {
          out[at] = docCreated[d];
        });
        yield* perDoc(3, Int32Array, 1, undefined, (out, at, d) => {
          out[at] = entityIdOf[docEntity[d]];
        });
        // Where each document's list ids start, then the end.
        let at = 0;
        yield* perDoc(4, Int32Array, 1, gone ? undefined : docStart, (out, k, d) => {
          out[k] = at;
          at += docStart[d + 1] - docStart[d];
        });
        yield [4, Int32Array.of(gone ? at : docStart[n])];
        if (!gone) for (let a = 0; a < poolBytes; a += max) yield [5, pool.subarray(a, Math.min(poolBytes, a + max))];
        else
          for (let a = 0; a < n; a += step) {
            const b = Math.min(n, a + step);
            let size = 0;
            for (let d = a; d < b; d++) if (isLive(d)) size += docStart[d + 1] - docStart[d];
            const out = new Uint8Array(size);
            let k = 0;
            for (let d = a; d < b; d++)
              if (isLive(d)) {
                out.set(pool.subarray(docStart[d], docStart[d + 1]), k);
                k += docStart[d + 1] - docStart[d];
              }
            yield [5, out];
          }
        yield [6, listN];
        yield [7, listMaxLen];
        // Each list's live postings, documents renumbered (all documents, then all tfs).
        for (const [section, docs] of [
          [8, true],
          [9, false],
        ] as const)
          for (const list of lists) {
            if (list.live === 0) continue;
            for (const l of list.parts) {
              const from = docs ? l.doc : l.tf;
              const per = docs ? max >> 2 : max >> 1;
              if (!gone) {
                for (let a = 0; a < l.n; a += per) yield [section, from.subarray(a, Math.min(l.n, a + per))];
                continue;
              }
              for (let a = 0; a < l.n; a += per) {
                const b = Math.min(l.n, a + per);
                let live = 0;
                for (let i = a; i < b; i++) if (isLive(l.doc[i])) live++;
                const out = docs ? new Int32Array(live) : new Uint16Array(live);
                let k = 0;
                for (let i = a; i < b; i++) if (isLive(l.doc[i])) out[k++] = docs ? newNumber(l.doc[i]) : l.tf[i];
                yield [section, out];
              }
            }
          }
        if (gone) {
          const mask = table.length - 1;
          for (let a = 0; a < n; a += step) {
            for (let d = a; d < Math.min(n, a + step); d++) {
              if (gone[d]) continue;
              const other = otherOf?.get(d);
              const h =
                other !== undefined
                  ? KeywordSpace.hash(other, undefined)
                  : Math.imul(
                      idWords[d * 4 + 3] ^ Math.imul(idWords[d * 4 + 2], 0x9e3779b1) ^ idWords[d * 4],
                      0x85ebca6b,
                    );
              let x = h & mask;
              while (table[x] !== 0) x = (x + 1) & mask;
              table[x] = newNumber(d) + 1;
            }
            yield [10, new Int32Array(0)]; // (a turn may end here)
          }
        }
        for (let a = 0; a < table.length; a += max >> 2) yield [10, table.subarray(a, a + (max >> 2))];
      },
      release: () => {
        if (!released) this.frozen--;
        released = true;
      },
    };
  }

  /** A space of the documents and lists of `p` (its arrays are used, not copied: they may be a mapped file's). */
  static fromParts(p: SpaceParts, compactAfter?: number): KeywordSpace {
    const s = new KeywordSpace(compactAfter);
    const n = p.count;
    s.count = n;
    s.idWords = p.idWords;
    s.docLen = p.docLen;
    s.docCreated = p.docCreated;
    s.docEntity = p.docEntity;
    s.docStart = p.docStart;
    s.pool = p.pool;
    s.gone = new Uint8Array(n + 1 + (n >> 3));
    for (const [d, id] of p.otherIds) s.otherIds.set(d, id);
    s.live = n;
    for (let d = 0; d < n; d++) s.totalLength += p.docLen[d];
    p.terms.forEach((term, i) => {
      const l = new List(i);
      const len = p.listN[i];
      l.n = len;
      l.live = len;
      l.maxLen = p.listMaxLen[i];
      l.doc = p.listDoc[i];
      l.tf = p.listTf[i];
      l.sealed = true;
      s.listById.push(l);
      // (A list left empty when the snapshot was taken keeps its id, without its term.)
      if (len > 0) s.lists.set(term, l);
    });
    p.entities.forEach((name, e) => {
      s.entityNames.push(name);
      s.entityIndex.set(name, e);
      s.entityCount.push(0);
      s.entityLive.push(0);
    });
    for (let d = 0; d < n; d++) s.entityCount[p.docEntity[d]]++;
    // (With an eighth of spare room each, as the per-document arrays of a snapshot have.)
    s.entityDocs = s.entityCount.map((c) => new Int32Array(c + (c >> 3) + 4));
    s.entityCount.fill(0);
    for (let d = 0; d < n; d++) {
      const e = p.docEntity[d];
      s.entityDocs[e][s.entityCount[e]++] = d;
    }
    for (let e = 0; e < s.entityLive.length; e++) s.entityLive[e] = s.entityCount[e];
    if (p.table.length > 0) s.table = p.table;
    else s.rehash(n);
    return s;
  }

  /** Drops spare room in every array (after a first load). */
  trim() {
    for (const l of this.listById) l.trim();
    const n = this.count;
    this.pool = trimmed(this.pool, this.docStart[n]);
    this.idWords = trimmed(this.idWords, n * 4 + 4);
    this.gone = trimmed(this.gone, n + 1);
    this.docLen = trimmed(this.docLen, n + 1);
    this.docCreated = trimmed(this.docCreated, n + 1);
    this.docEntity = trimmed(this.docEntity, n + 1);
    this.docStart = trimmed(this.docStart, n + 2);
    for (let e = 0; e < this.entityDocs.length; e++)
      this.entityDocs[e] = trimmed(this.entityDocs[e], this.entityCount[e]);
  }

  /** Drops gone documents and renumbers the rest; lists left empty are dropped. */
  private compact() {
    const n = this.count;
    const renumber = new Int32Array(n).fill(-1);
    const old = {
      idWords: this.idWords,
      docLen: this.docLen,
      docCreated: this.docCreated,
      docEntity: this.docEntity,
      docStart: this.docStart,
      pool: this.pool,
      gone: this.gone,
      otherIds: new Map(this.otherIds),
    };
    this.idWords = new Int32Array(old.idWords.length);
    this.docLen = new Int32Array(old.docLen.length);
    this.docCreated = new Float64Array(old.docCreated.length);
    this.docEntity = new Int32Array(old.docEntity.length);
    this.docStart = new Int32Array(old.docStart.length);
    this.pool = new Uint8Array(old.pool.length);
    this.gone = new Uint8Array(old.gone.length);
    this.otherIds.clear();
    let e = 0;
    for (let d = 0; d < n; d++) {
      if (old.gone[d]) continue;
      renumber[d] = e;
      this.idWords.set(old.idWords.subarray(d * 4, d * 4 + 4), e * 4);
      const other = old.otherIds.get(d);
      if (other !== undefined) this.otherIds.set(e, other);
      this.docLen[e] = old.docLen[d];
      this.docCreated[e] = old.docCreated[d];
      this.docEntity[e] = old.docEntity[d];
      const from = old.docStart[d];
      const to = old.docStart[d + 1];
      this.pool.set(old.pool.subarray(from, to), this.docStart[e]);
      this.docStart[e + 1] = this.docStart[e] + (to - from);
      e++;
    }
    this.count = e;
    for (const [term, l] of this.lists) {
      let k = 0;
      if (l.sealed) {
        // Out of the mapped part and the tail into one array on the heap.
        const doc = new Int32Array(l.live);
        const tf = new Uint16Array(l.live);
        for (let i = 0; i < l.n; i++) {
          const d = renumber[l.docAt(i)];
          if (d < 0) continue;
          doc[k] = d;
          tf[k++] = l.tfAt(i);
        }
        l.doc = doc;
        l.tf = tf;
        l.sealed = false;
        l.tailN = 0;
        l.tailDoc = EMPTY_DOCS;
        l.tailTf = EMPTY_TFS;
      } else
        for (let i = 0; i < l.n; i++) {
          const d = renumber[l.doc[i]];
          if (d < 0) continue;
          l.doc[k] = d;
          l.tf[k] = l.tf[i];
          k++;
        }
      l.n = k;
      if (k === 0) this.lists.delete(term);
    }
    for (let x = 0; x < this.entityDocs.length; x++) {
      const docs = this.entityDocs[x];
      let k = 0;
      for (let i = 0; i < this.entityCount[x]; i++) {
        const d = renumber[docs[i]];
        if (d >= 0) docs[k++] = d;
      }
      this.entityCount[x] = k;
    }
    this.rehash(this.live);
    this.dead = 0;
  }
}

/** A memory's indexed terms: [length, createdAt, entity, term, tf, term, tf, ...]. */
export type DocTerms = (string | number)[];

export function packTerms(content: string, createdAt: number, entity: string): DocTerms {
  const { tf, length } = termCounts(content);
  const v: DocTerms = [length, createdAt, entity];
  for (const [term, n] of tf) v.push(term, n);
  return v;
}

/**
 * A space's documents and lists as flat arrays, as a snapshot holds them (KeywordSpace.fromParts).
 * The per-document arrays may be longer than `count` (docStart than count + 1, pool than its
 * bytes): spare room that documents added later are written into.
 */
export interface SpaceParts {
  count: number;
  idWords: Int32Array<ArrayBuffer>;
  docLen: Int32Array<ArrayBuffer>;
  docCreated: Float64Array<ArrayBuffer>;
  docEntity: Int32Array<ArrayBuffer>;
  docStart: Int32Array<ArrayBuffer>;
  pool: Uint8Array<ArrayBuffer>;
  /** Per list: its length, longest document, documents and tfs. */
  listN: Int32Array<ArrayBuffer>;
  listMaxLen: Int32Array<ArrayBuffer>;
  listDoc: Int32Array<ArrayBuffer>[];
  listTf: Uint16Array<ArrayBuffer>[];
  /** Postings in all (the sum of listN). */
  postings: number;
  /** Per list id its term ("" for a list left empty). */
  terms: string[];
  entities: string[];
  otherIds: [number, string][];
  /** The id table (KeywordSpace's, of this build's hash), or none (empty): then the load makes it. */
  table: Int32Array<ArrayBuffer>;
}

/** A piece of a snapshot's section. */
export type Piece = Int32Array | Uint16Array | Uint8Array | Float64Array;

/**
 * A space as of one moment (KeywordSpace.freeze), as a snapshot holds it: its sizes here, its
 * sections as pieces. The sections, in order: 0 idWords (4 per document), 1 docLen, 2
 * docCreated, 3 docEntity, 4 docStart (one more), 5 pool (bytes), 6 listN, 7 listMaxLen (one per
 * list), 8 every list's documents, 9 every list's tfs (`postings` each), 10 the id table (`table`
 * items).
 */
export interface FrozenSpace {
  count: number;
  pool: number;
  postings: number;
  table: number;
  /** Per list id its term ("" for a list without live postings). */
  terms: string[];
  entities: string[];
  otherIds: [number, string][];
  /** The sections' pieces in order, each at most about `max` bytes, with its section's number. */
  pieces(max: number): Generator<[number, Piece]>;
  /** Ends the freeze (a compaction may run again); once is enough, more are ignored. */
  release(): void;
}

const EMPTY: Scored[] = [];

/** A query term that occurs in the scope, with its list, weight and idf (times its weight). */
type QueryTerm = { term: string; list: List; weight: number; idf: number };

/**
 * Whether a candidate is returned: its memory record when it is current, in the namespace and
 * passes the search's filter, else null (the caller reads its store; asked once per id a search).
 */
export type Accept = (id: string) => MemoryRecord | null;

/**
 * BM25 top-k over a scope, exact (k1, b and the terms' weights: text/scoring.ts), on the
 * namespace's in-memory lists, whose document counts and lengths are those of the same state.
 * Over a namespace, document at a time over the query's lists (namespaceTop), df being a list's
 * live count; over an entity, each of its documents is looked at once, df counted there. What is
 * returned is checked by `accept`. The two scopes are separate functions: a process
 * that first ran many small entity searches made one function's compiled code 3× slower for
 * namespace searches (JSC specialises a function for what it has seen). Synchronous: the space
 * must not change during it (its scratch arrays are the space's own).
 */
export function keywordSearch(
  space: KeywordSpace,
  scope: MemoryScope,
  terms: readonly Term[],
  limit: number,
  acceptId: Accept,
): Scored[] {
  if (terms.length === 0) return EMPTY;
  // The scope's documents and their average length (BM25's N and avgdl).
  const ofEntity = scope.entity === undefined ? undefined : space.entityDocuments(scope.entity);
  const docsOf = ofEntity?.docs;
  let { docs, totalLength } = space.stats;
  if (scope.entity !== undefined) {
    docs = ofEntity?.live ?? 0;
    totalLength = 0;
    if (docsOf) for (const d of docsOf) if (!space.gone[d]) totalLength += space.docLen[d];
  }
  if (docs === 0) return EMPTY;
  const avg = totalLength / docs;
  const accepted = new Map<string, MemoryRecord | null>();
  const accept: Accept = (id) => {
    let r = accepted.get(id);
    if (r === undefined) {
      r = acceptId(id);
      accepted.set(id, r);
    }
    return r;
  };
  // The query's terms that occur, rarest first (ties by term, so sums are made in one order).
  const weights = new Map<string, number>();
  for (const t of terms) weights.set(t.term, Math.max(weights.get(t.term) ?? 0, t.weight));
  const ts: QueryTerm[] = [...weights]
    .map(([term, weight]) => ({ term, weight, list: space.lists.get(term) }))
    .filter((t): t is { term: string; weight: number; list: List } => t.list !== undefined && t.list.live > 0)
    .map(({ term, weight, list }) => ({ term, weight, list, idf: weight * idf(docs, list.live) }))
    .sort((a, b) => b.idf - a.idf || (a.term < b.term ? -1 : 1));
  if (ts.length === 0) return EMPTY;
  if (!docsOf) return namespaceTop(space, ts, avg, limit, accept);
  if (space.touched.length < docsOf.length) {
    const room = Math.max(1024, docsOf.length + (docsOf.length >> 3));
    space.touched = new Int32Array(room);
    space.values = new Float64Array(room);
  }
  return pickAccepted(space, entityCandidates(space, docsOf, ts, docs, avg), limit, accept);
}

/**
 * An entity's candidates into (space.touched, space.values): its documents, each looked at once
 * for which of the query's lists hold it. Returns how many.
 */
function entityCandidates(space: KeywordSpace, docsOf: Int32Array, ts: QueryTerm[], docs: number, avg: number) {
  const { touched, values } = space;
  const listIds = ts.map((t) => t.list.id);
  const hits: number[] = []; // document, then (list index, tf) pairs, then -1
  const df = ts.map(() => 0);
  for (const d of docsOf) {
    if (space.gone[d]) continue;
    let found = false;
    const n = space.listsOf(d);
    for (let k = 0; k < n; k++) {
      const q = listIds.indexOf(space.termIds[k]);
      if (q < 0) continue;
      if (!found) hits.push(d);
      found = true;
      hits.push(q, space.termTfs[k]);
      df[q]++;
    }
    if (found) hits.push(-1);
  }
  const w = df.map((n, q) => ts[q].weight * idf(docs, n));
  const parts = ts.map(() => 0);
  let count = 0;
  for (let i = 0; i < hits.length; ) {
    const d = hits[i++];
    parts.fill(0);
    for (; hits[i] !== -1; i += 2) parts[hits[i]] = bm25(w[hits[i]], hits[i + 1], space.docLen[d], avg);
    i++;
    let sum = 0;
    for (const p of parts) sum += p;
    touched[count] = d;
    values[count++] = sum;
  }
  return count;
}

/**
 * How many times a namespace search left a list not essential, and scored the list of the
 * highest bound first (for tests).
 */
export const maxScoreStats = { nonEssential: 0, seeded: 0 };

/**
 * A namespace search scores the list of the highest bound first when the other lists together
 * hold at least this many times its postings (maxScore; tests set 0, always, and Infinity,
 * never). 1 to 64 measured alike at 1,000,000 (bench/notes.md).
 */
export const maxScoreTuning = { seedRatio: 4 };

/** A document number after every real one: a cursor past its list's end is at it. */
const END = 0x7fffffff;

/**
 * A query term's postings in document order: a sealed list's mapped part, then its tail
 * (documents are numbered in the order added, so every list ascends, tail included).
 */
class Cursor {
  /** The posting it is at, and that posting's document (END once past the last). */
  i = 0;
  d = END;
  private readonly doc: Int32Array;
  private readonly tf: Uint16Array;
  private readonly tailDoc: Int32Array;
  private readonly tailTf: Uint16Array;
  private readonly head: number;
  private readonly n: number;
  constructor(l: List) {
    this.doc = l.doc;
    this.tf = l.tf;
    this.tailDoc = l.tailDoc;
    this.tailTf = l.tailTf;
    this.head = l.n - l.tailN;
    this.n = l.n;
    if (this.n > 0) this.d = this.docAt(0);
  }
  private docAt(i: number): number {
    return i < this.head ? this.doc[i] : this.tailDoc[i - this.head];
  }
  /** The tf of the posting it is at. */
  tfNow(): number {
    const i = this.i;
    return i < this.head ? this.tf[i] : this.tailTf[i - this.head];
  }
  next() {
    const i = ++this.i;
    this.d = i < this.n ? this.docAt(i) : END;
  }
  /** Moves to the first posting of a document at or after `target` (galloping, then halving). */
  seek(target: number) {
    if (this.d >= target) return;
    let lo = this.i; // (its document is before target)
    let hi = lo + 1;
    for (let step = 1; hi < this.n && this.docAt(hi) < target; step *= 2) {
      lo = hi;
      hi = lo + step;
    }
    if (hi > this.n) hi = this.n;
    while (hi - lo > 1) {
      const mid = (lo + hi) >>> 1;
      if (this.docAt(mid) < target) lo = mid;
      else hi = mid;
    }
    this.i = hi;
    this.d = hi < this.n ? this.docAt(hi) : END;
  }
}

/**
 * The most a term of idf (times its weight) `w` adds to a document's score: the highest bm25 of
 * its list's skyline (List.sky), each tf at its shortest document.
 */
function boundOf(sky: Int32Array, skyTf: number, w: number, avg: number): number {
  let most = 0;
  for (let t = 1; t < SKY; t++) if (sky[t] !== NONE) most = Math.max(most, bm25(w, t, sky[t], avg));
  if (sky[SKY] !== NONE) most = Math.max(most, bm25(w, skyTf, sky[SKY], avg));
  return most;
}

/**
 * A namespace's best `limit` accepted documents, document at a time by MaxScore (Turtle and
 * Flood, 1995) over the query's lists, which all ascend by document. A list is walked only while
 * it is essential: once the `limit`-th best score so far (theta) exceeds what it and every list
 * of a lower bound could add together, a document they alone hold cannot reach the top, and they
 * are only looked up (galloping) for the documents of the other lists whose scores could. The
 * bounds are each list's skyline's (boundOf). A document's score is its terms' bm25 summed in
 * the order of `ts`, as a term-at-a-time walk sums them, so scores are the same to the bit.
 * (The list of the highest bound may be scored first: maxScore.)
 * The first pass does not ask `accept`: when all its top documents are accepted they are the
 * answer (theta was at most the final one all along); otherwise a second pass admits only
 * accepted documents to the top (theta is then that of accepted documents).
 */
function namespaceTop(space: KeywordSpace, ts: QueryTerm[], avg: number, limit: number, accept: Accept): Scored[] {
  const m = ts.length;
  const w = Float64Array.from(ts, (t) => t.idf);
  // Most postings have tf 1: their contribution by length, from a table.
  const ones = ts.map((t) => {
    const one = new Float64Array(t.list.maxLen + 1);
    for (let l = 0; l < one.length; l++) one[l] = bm25(t.idf, 1, l, avg);
    return one;
  });
  const bounds = Float64Array.from(ts, (t) => boundOf(space.skylineOf(t.list), t.list.skyTf, t.idf, avg));
  // The lists by bound, lowest first (ties by their order in ts), and the sums of those bounds.
  const order = Int32Array.from(ts.keys()).sort((a, b) => bounds[a] - bounds[b] || a - b);
  const below = new Float64Array(m + 1);
  for (let e = 0; e < m; e++) below[e + 1] = below[e] + bounds[order[e]];
  for (const check of [undefined, accept]) {
    const top = maxScore(space, ts, w, ones, bounds, order, below, avg, limit, check);
    const out: Scored[] = [];
    for (let i = 0; i < top.docs.length; i++) {
      const r = accept(space.idOf(top.docs[i]));
      if (!r) break;
      out.push({ memory: r, score: top.scores[i] });
    }
    if (out.length === top.docs.length) return out;
  }
  throw new Error("unreachable: the second pass holds accepted documents only");
}

/**
 * The best documents so far of a namespace search: a heap of `limit` whose root ranks last, in
 * byScoreThenNewer's order (score, then createdAt, then id, high to low).
 */
class Top {
  readonly docs: Int32Array;
  readonly scores: Float64Array;
  size = 0;
  constructor(
    private readonly space: KeywordSpace,
    readonly limit: number,
    private readonly accept: Accept | undefined,
  ) {
    this.docs = new Int32Array(limit);
    this.scores = new Float64Array(limit);
  }
  /** Whether (document a, score x) ranks before (b, y). */
  before(a: number, x: number, b: number, y: number): boolean {
    if (x !== y) return x > y;
    const created = this.space.docCreated;
    if (created[a] !== created[b]) return created[a] > created[b];
    return this.space.idAfter(a, b);
  }
  /**
   * Puts document d in if it ranks there (and `accept` takes it, when given); returns the
   * cutoff: scores below it cannot get in any more (the slack keeps rounding from dropping a
   * tie), -Infinity while not full.
   */
  offer(d: number, score: number): number {
    const { docs: hd, scores: hs, limit } = this;
    if (this.size === limit && !this.before(d, score, hd[0], hs[0])) return hs[0] - 1e-9;
    if (this.accept && !this.accept(this.space.idOf(d))) return this.cutoff();
    if (this.size < limit) {
      let c = this.size++;
      while (c > 0) {
        const p = (c - 1) >> 1;
        if (!this.before(hd[p], hs[p], d, score)) break;
        hd[c] = hd[p];
        hs[c] = hs[p];
        c = p;
      }
      hd[c] = d;
      hs[c] = score;
    } else {
      let c = 0;
      for (;;) {
        const l = 2 * c + 1;
        if (l >= limit) break;
        const r = l + 1 < limit && this.before(hd[l], hs[l], hd[l + 1], hs[l + 1]) ? l + 1 : l;
        if (!this.before(d, score, hd[r], hs[r])) break;
        hd[c] = hd[r];
        hs[c] = hs[r];
        c = r;
      }
      hd[c] = d;
      hs[c] = score;
    }
    return this.cutoff();
  }
  cutoff(): number {
    return this.size === this.limit ? this.scores[0] - 1e-9 : Number.NEGATIVE_INFINITY;
  }
  /** Its documents and scores, best first. */
  sorted(): { docs: Int32Array; scores: Float64Array } {
    const { docs: hd, scores: hs } = this;
    const at = Array.from({ length: this.size }, (_, i) => i).sort((i, j) =>
      this.before(hd[i], hs[i], hd[j], hs[j]) ? -1 : 1,
    );
    return { docs: Int32Array.from(at, (i) => hd[i]), scores: Float64Array.from(at, (i) => hs[i]) };
  }
}

/**
 * namespaceTop's pass: the best `limit` documents (of those `accept` takes, when given), best
 * first, in byScoreThenNewer's order.
 *
 * When the list of the highest bound (most often the query's rarest word) is short against the
 * others (maxScoreTuning.seedRatio), its documents are scored first, one by one, each looked up
 * in the other lists (seedPass): the documents that hold the rarest word are most often the
 * best, so theta starts high. The walk of the other lists (walkPass) then leaves that list out,
 * its bound too (a document it holds was scored already, and is passed over), so they are often
 * not essential from the start.
 */
function maxScore(
  space: KeywordSpace,
  ts: QueryTerm[],
  w: Float64Array,
  ones: Float64Array[],
  bounds: Float64Array,
  order: Int32Array,
  below: Float64Array,
  avg: number,
  limit: number,
  accept: Accept | undefined,
): { docs: Int32Array; scores: Float64Array } {
  const m = ts.length;
  const top = new Top(space, limit, accept);
  const parts = new Float64Array(m);
  const seed = order[m - 1];
  let others = 0;
  for (let q = 0; q < m; q++) if (q !== seed) others += ts[q].list.n;
  if (m > 1 && ts[seed].list.n * maxScoreTuning.seedRatio <= others) {
    maxScoreStats.seeded++;
    seedPass(space, ts, w, ones, bounds, order, below, avg, top, parts);
    // The walk of the others: without that list (its part is 0 in what it scores).
    parts[seed] = 0;
    walkPass(space, ts, w, ones, bounds, order.subarray(0, m - 1), below, avg, top, parts, new Cursor(ts[seed].list));
  } else walkPass(space, ts, w, ones, bounds, order, below, avg, top, parts, undefined);
  return top.sorted();
}

/** maxScore's scoring of every document of the list of the highest bound (order's last). */
function seedPass(
  space: KeywordSpace,
  ts: QueryTerm[],
  w: Float64Array,
  ones: Float64Array[],
  bounds: Float64Array,
  order: Int32Array,
  below: Float64Array,
  avg: number,
  top: Top,
  parts: Float64Array,
) {
  const m = ts.length;
  const { gone, docLen } = space;
  const seed = order[m - 1];
  const cursors = ts.map((t) => new Cursor(t.list));
  const c = cursors[seed];
  let cutoff = top.cutoff();
  for (; c.d !== END; c.next()) {
    const d = c.d;
    if (gone[d]) continue;
    const len = docLen[d];
    const tf0 = c.tfNow();
    parts[seed] = tf0 === 1 ? ones[seed][len] : bm25(w[seed], tf0, len, avg);
    let upper = parts[seed] + below[m - 1];
    if (upper < cutoff) continue;
    // The other lists, highest bound first, while the document can still reach the top (the
    // same loop as walkPass's over the lists not essential: one function both call measured
    // slower, p99 +14-16%, bench/notes.md).
    let e = m - 2;
    for (; e >= 0; e--) {
      const q = order[e];
      const cq = cursors[q];
      upper -= bounds[q];
      cq.seek(d);
      if (cq.d === d) {
        const tf = cq.tfNow();
        const p = tf === 1 ? ones[q][len] : bm25(w[q], tf, len, avg);
        parts[q] = p;
        upper += p;
      } else parts[q] = 0;
      if (upper < cutoff) break;
    }
    if (e >= 0) continue;
    let score = 0;
    for (let q = 0; q < m; q++) score += parts[q];
    cutoff = top.offer(d, score);
  }
}

/**
 * maxScore's walk of the lists of `order` (by bound, lowest first; `below` the sums of their
 * bounds) side by side, passing over the documents of `done`'s list (scored by seedPass).
 */
function walkPass(
  space: KeywordSpace,
  ts: QueryTerm[],
  w: Float64Array,
  ones: Float64Array[],
  bounds: Float64Array,
  order: Int32Array,
  below: Float64Array,
  avg: number,
  top: Top,
  parts: Float64Array,
  done: Cursor | undefined,
) {
  const m = order.length;
  const all = ts.length;
  const { gone, docLen } = space;
  const byBound = Array.from(order, (q) => new Cursor(ts[q].list));
  let cutoff = top.cutoff();
  /** Lists byBound[0, first) are not essential. */
  let first = 0;
  while (first < m && below[first + 1] < cutoff) {
    first++;
    maxScoreStats.nonEssential++;
  }
  for (;;) {
    let d = END;
    for (let e = first; e < m; e++) if (byBound[e].d < d) d = byBound[e].d;
    if (d === END) break;
    const len = docLen[d];
    let upper = below[first];
    for (let e = first; e < m; e++) {
      const c = byBound[e];
      const q = order[e];
      if (c.d === d) {
        const tf = c.tfNow();
        const p = tf === 1 ? ones[q][len] : bm25(w[q], tf, len, avg);
        parts[q] = p;
        upper += p;
        c.next();
      } else parts[q] = 0;
    }
    if (gone[d] || upper < cutoff) continue;
    // The lists not essential, highest bound first, while the document can still reach the top
    // (seedPass's loop over the other lists, kept apart for speed: see there).
    let e = first - 1;
    for (; e >= 0; e--) {
      const c = byBound[e];
      const q = order[e];
      upper -= bounds[q];
      c.seek(d);
      if (c.d === d) {
        const tf = c.tfNow();
        const p = tf === 1 ? ones[q][len] : bm25(w[q], tf, len, avg);
        parts[q] = p;
        upper += p;
      } else parts[q] = 0;
      if (upper < cutoff) break;
    }
    if (e >= 0) continue;
    let score = 0;
    for (let q = 0; q < all; q++) score += parts[q];
    if (done) {
      done.seek(d);
      if (done.d === d) continue;
    }
    const was = cutoff;
    cutoff = top.offer(d, score);
    if (cutoff !== was)
      while (first < m && below[first + 1] < cutoff) {
        first++;
        maxScoreStats.nonEssential++;
      }
  }
}

/**
 * The best `limit` accepted of a search's candidates (space.touched, space.values)[0, count):
 * score high to low, then newer first (createdAt, then id), as byScoreThenNewer orders them, so
 * a tie among many needs no record reads beyond the ones returned.
 */
function pickAccepted(
  space: KeywordSpace,
  count: number,
  limit: number,
  accept: (id: string) => MemoryRecord | null,
): Scored[] {
  const { touched, values, docCreated } = space;
  /** Whether candidate i ranks before candidate j. */
  const before = (i: number, j: number) => {
    if (values[i] !== values[j]) return values[i] > values[j];
    const a = touched[i];
    const b = touched[j];
    if (docCreated[a] !== docCreated[b]) return docCreated[a] > docCreated[b];
    return space.idAfter(a, b);
  };
  for (let want = limit * 4 + 16; ; want *= 4) {
    // The best `want` by a heap whose root ranks last.
    const heap: number[] = [];
    for (let i = 0; i < count; i++) {
      if (heap.length < want) {
        let c = heap.push(i) - 1;
        while (c > 0) {
          const p = (c - 1) >> 1;
          if (!before(heap[p], heap[c])) break;
          [heap[p], heap[c]] = [heap[c], heap[p]];
          c = p;
        }
      } else if (before(i, heap[0])) {
        heap[0] = i;
        let c = 0;
        for (;;) {
          const l = 2 * c + 1;
          if (l >= heap.length) break;
          const m = l + 1 < heap.length && before(heap[l], heap[l + 1]) ? l + 1 : l;
          if (!before(heap[c], heap[m])) break;
          [heap[c], heap[m]] = [heap[m], heap[c]];
          c = m;
        }
      }
    }
    heap.sort((i, j) => (before(i, j) ? -1 : 1));
    const out: Scored[] = [];
    for (const j of heap) {
      const m = accept(space.idOf(touched[j]));
      if (m) out.push({ memory: m, score: values[j] });
      if (out.length === limit) return out;
    }
    if (heap.length >= count) return out;
  }
}

/**
 * Indexes of the `k` largest of the first `n` values and of any equal to the k-th (all when
 * k ≥ n), unordered.
 */
export function topIndexes(values: Float32Array | Float64Array, k: number, n = values.length): number[] {
  if (k >= n) return Array.from({ length: n }, (_, i) => i);
  // The k-th largest value by a min-heap of the best k seen, then everything at or above it.
  const heap = new Float64Array(k);
  let size = 0;
  for (let i = 0; i < n; i++) {
    const v = values[i];
    if (size < k) {
      let c = size++;
      while (c > 0) {
        const p = (c - 1) >> 1;
        if (heap[p] <= v) break;
        heap[c] = heap[p];
        c = p;
      }
      heap[c] = v;
    } else if (v > heap[0]) {
      let c = 0;
      for (;;) {
        const l = 2 * c + 1;
        if (l >= k) break;
        const m = l + 1 < k && heap[l + 1] < heap[l] ? l + 1 : l;
        if (heap[m] >= v) break;
        heap[c] = heap[m];
        c = m;
      }
      heap[c] = v;
    }
  }
  const cut = heap[0];
  const out: number[] = [];
  for (let i = 0; i < n; i++) if (values[i] >= cut) out.push(i);
  return out;
}
