// A namespace's keyword lists in memory: backend-neutral (no engine here). LMDB keeps one per
// namespace searched (lmdb/keyword-cache.ts builds and follows it from its sub-databases);
// PostgreSQL keeps one per replica and namespace (postgres/keyword-cache.ts, following the events
// table). Documents are added and removed here; the table they are kept in is documents.ts,
// each term's postings lists.ts, the search search.ts and walk.ts, the snapshot snapshot.ts.
import { indexTerms, termFrequencies } from "../../text/tokens";
import { DocumentTable } from "./documents";
import { words } from "./ids";
import { EMPTY_DOCS, EMPTY_TFS, grown, List, MAX_TF, NONE, SKY, trimmed } from "./lists";
import { type DocTerms, PackedDocs } from "./packed";
import { type FrozenSpace, freezeTable, type SpaceParts, thaw } from "./snapshot";

/**
 * A namespace's postings. Document numbers are this process's own, in the order documents were
 * added (so every list holds its documents in ascending order); a changed memory gets a new one.
 * Per document: its (list id, tf) pairs, varint-encoded in one shared pool of bytes (to unlist it
 * when it goes, and for entity searches; a namespace search walks the lists only).
 */
export class KeywordSpace extends DocumentTable {
  /**
   * While packed (see packing): every live document as a binary record in one array (packed.ts;
   * a string per document measured ~450 bytes of heap each however short, JSON lines in one
   * string about twice the records); and no lists.
   */
  private small: PackedDocs | undefined;
  /** Estimated bytes of the lists (objects and arrays), for heldBytes. */
  private listBytes = 0;
  /** Terms' numbers -> list ids (see listOfWord); emptied by a compaction. */
  private wordKeys: Int32Array = EMPTY_DOCS;
  private wordLists: Int32Array = EMPTY_DOCS;
  private wordCount = 0;

  /**
   * Compacts once more than this many documents (and more than half) are gone. `packed`: its
   * documents are kept packed while they are few (see packing).
   */
  constructor(
    private readonly compactAfter = 10000,
    packed = false,
    room?: number,
  ) {
    // (Nothing of the document table is used while packed: unpack makes it.)
    super(packed ? 0 : room);
    if (packed) this.small = new PackedDocs();
  }

  /** Whether its documents are packed (see packing). */
  get packed(): boolean {
    return this.small !== undefined;
  }

  /**
   * The space a search reads: itself, or, packed, lists made of its documents as they are now
   * (not kept: about 2 µs a document), of `terms` only when given.
   */
  expanded(terms?: ReadonlySet<string>): KeywordSpace {
    if (this.small === undefined) return this;
    const s = new KeywordSpace(this.compactAfter, false, Math.max(this.live, 1));
    // (A search's: only its terms' lists, each document's length still all of its terms. The
    // lists of every term of every document searched made most of a small namespace's process
    // memory, as the collector's slack: issue 32.)
    for (const [id, v] of this.small.docs(terms)) s.add(id, v, true);
    return s;
  }

  /** Lists its packed documents, for good (past packing.upTo). */
  private unpack() {
    const docs = [...this.small!.docs()];
    this.small = undefined;
    this.allocate(docs.length);
    this.live = 0;
    this.totalLength = 0;
    for (const [id, v] of docs) this.add(id, v, true);
  }

  /**
   * What it holds in memory, in bytes, for the search-memory budget (an estimate: its arrays'
   * lengths, and a typical size for each object, string and map entry; a mapped snapshot's
   * arrays count as held).
   */
  heldBytes(): number {
    if (this.small !== undefined) return SPACE_BYTES + this.small.bytes.byteLength + 64;
    return (
      SPACE_BYTES +
      this.idWords.byteLength +
      this.table.byteLength +
      this.gone.byteLength +
      this.docLen.byteLength +
      this.docCreated.byteLength +
      this.docEntity.byteLength +
      this.docStart.byteLength +
      this.pool.byteLength +
      this.touched.byteLength +
      this.values.byteLength +
      this.termIds.byteLength * 2 +
      this.wordKeys.byteLength * 2 +
      this.listBytes +
      // (The entities' arrays of documents: about 4 bytes a document, with room.)
      this.count * 6 +
      this.entityNames.length * ENTITY_BYTES +
      this.otherIds.size * OTHER_ID_BYTES
    );
  }

  /** The lists' bytes counted again (after a snapshot was read, a trim or a compaction). */
  private countLists() {
    let n = 0;
    for (const [term, l] of this.lists) n += LIST_BYTES + term.length + (l.doc.length + l.tailDoc.length) * 6;
    this.listBytes = n;
  }

  /** Adds a memory from its terms (DocTerms: [length, createdAt, entity, term, tf, ...]). */
  add(id: string, v: DocTerms, isNew = false) {
    if (this.small !== undefined) {
      if (!isNew) this.remove(id);
      this.small.add(id, v);
      this.live++;
      this.totalLength += v[0] as number;
      if (this.live > packing.upTo) this.unpack();
      return;
    }
    const length = v[0] as number;
    const d = this.begin(id, isNew, length, v[1] as number, ((v.length - 3) / 2) * 8);
    let k = this.docStart[d];
    for (let i = 3; i < v.length; i += 2)
      k = this.post(d, this.listOf(v[i] as string), Math.min(MAX_TF, v[i + 1] as number), length, k);
    this.end(d, k, v[2] as string);
  }

  /**
   * Adds a memory from its text: the same as add(id, packTerms(content, createdAt, entity)), with
   * each term's list found by the term's number (indexTerms' ids: a plain ASCII text) in a table of
   * numbers, not by its text in the lists' Map (its lookups were about a fifth of the CPU of
   * following a bulk load, issue 32), and no terms array made.
   */
  addText(id: string, content: string, createdAt: number, entity: string, isNew = false) {
    const ids = scratchIds;
    const terms = indexTerms(content, ids);
    if (this.small !== undefined || ids.length !== terms.length) {
      this.add(id, packFrom(terms, createdAt, entity), isNew);
      return;
    }
    const length = terms.length;
    const d = this.begin(id, isNew, length, createdAt, length * 8);
    // Each distinct term's list in the order first seen (as packTerms orders them), its tf counted
    // in List.pending.
    const seen = scratchLists;
    let n = 0;
    for (let i = 0; i < length; i++) {
      const l = this.listOfWord(ids[i], terms[i]);
      if (l.pending++ === 0) seen[n++] = l;
    }
    let k = this.docStart[d];
    for (let i = 0; i < n; i++) {
      const l = seen[i];
      k = this.post(d, l, Math.min(MAX_TF, l.pending), length, k);
      l.pending = 0;
    }
    seen.length = 0;
    this.end(d, k, entity);
  }

  /** A new document for `id` (the live one of that id gone first, unless `isNew`), its terms' room in the pool made. */
  private begin(id: string, isNew: boolean, length: number, createdAt: number, poolRoom: number): number {
    if (!isNew) this.remove(id);
    const d = this.count++;
    // (Each array by its own length: they need not have grown in step, after a snapshot was read.)
    this.gone = grown(this.gone, d + 1);
    this.docLen = grown(this.docLen, d + 1);
    this.docCreated = grown(this.docCreated, d + 1);
    this.docEntity = grown(this.docEntity, d + 1);
    this.docStart = grown(this.docStart, d + 2);
    this.idWords = grown(this.idWords, (d + 1) * 4);
    const w = words(id);
    if (w) {
      const x = this.idWords;
      x[d * 4] = w[0];
      x[d * 4 + 1] = w[1];
      x[d * 4 + 2] = w[2];
      x[d * 4 + 3] = w[3];
    } else {
      this.idWords.fill(0, d * 4, d * 4 + 4);
      this.otherIds.set(d, id);
    }
    this.gone[d] = 0;
    if ((this.live + 1) * 2 > this.table.length) this.rehash(this.live + 1);
    this.table[this.slot(id, w)] = d + 1;
    this.live++;
    this.pool = grown(this.pool, this.docStart[d] + poolRoom);
    this.docLen[d] = length;
    this.totalLength += length;
    this.totalSquares += length * length;
    this.docCreated[d] = createdAt;
    return d;
  }

  /** Posts document d with tf in list l, and (list id, tf) at k in the pool; returns where the pool goes on. */
  private post(d: number, l: List, tf: number, length: number, k: number): number {
    const pool = this.pool;
    const room = l.doc.length + l.tailDoc.length;
    l.push(d, tf, length);
    this.listBytes += (l.doc.length + l.tailDoc.length - room) * 6;
    let id = l.id;
    for (; id >= 0x80; id >>>= 7) pool[k++] = (id & 0x7f) | 0x80;
    pool[k++] = id;
    for (; tf >= 0x80; tf >>>= 7) pool[k++] = (tf & 0x7f) | 0x80;
    pool[k++] = tf;
    return k;
  }

  /** Ends document d: its pool ends at k; its entity. */
  private end(d: number, k: number, entity: string) {
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

  /** The list of a term, made if new. */
  private listOf(term: string): List {
    let l = this.lists.get(term);
    if (!l) {
      l = new List(this.listById.length);
      this.listById.push(l);
      this.lists.set(term, l);
      this.listBytes += LIST_BYTES + term.length;
    }
    return l;
  }

  /**
   * The list of a term by its number (see addText), made if new: open addressing over the numbers
   * seen (wordKeys, 0 empty) to list ids (wordLists); a number not there yet is found by its text
   * (listOf) once.
   */
  private listOfWord(word: number, term: string): List {
    let keys = this.wordKeys;
    let mask = keys.length - 1;
    let s = 0;
    if (mask > 0)
      for (s = wordHash(word) & mask; ; s = (s + 1) & mask) {
        const k = keys[s];
        if (k === word) return this.listById[this.wordLists[s]];
        if (k === 0) break;
      }
    const l = this.listOf(term);
    if ((this.wordCount + 1) * 2 > keys.length) {
      this.rewordTable();
      keys = this.wordKeys;
      mask = keys.length - 1;
      s = wordHash(word) & mask;
      while (keys[s] !== 0) s = (s + 1) & mask;
    }
    keys[s] = word;
    this.wordLists[s] = l.id;
    this.wordCount++;
    return l;
  }

  /**
   * The numbers' table twice as large, or emptied when it holds many more numbers than there are
   * lists (words the word cache forgot and numbered again: see language.ts).
   */
  private rewordTable() {
    const keys = this.wordKeys;
    const values = this.wordLists;
    const n = keys.length === 0 ? 64 : this.wordCount > this.lists.size * 2 ? keys.length : keys.length * 2;
    this.wordKeys = new Int32Array(n);
    this.wordLists = new Int32Array(n);
    const keep = this.wordCount <= this.lists.size * 2;
    this.wordCount = 0;
    if (!keep) return;
    const mask = n - 1;
    for (let i = 0; i < keys.length; i++) {
      if (keys[i] === 0) continue;
      let s = wordHash(keys[i]) & mask;
      while (this.wordKeys[s] !== 0) s = (s + 1) & mask;
      this.wordKeys[s] = keys[i];
      this.wordLists[s] = values[i];
      this.wordCount++;
    }
  }

  remove(id: string) {
    if (this.small !== undefined) {
      const length = this.small.remove(id);
      if (length === undefined) return;
      this.live--;
      this.totalLength -= length;
      return;
    }
    const w = words(id);
    const s = this.slot(id, w);
    if (this.table[s] === 0) return;
    const d = this.table[s] - 1;
    this.unslot(s);
    this.otherIds.delete(d);
    this.live--;
    this.gone[d] = 1;
    this.totalLength -= this.docLen[d];
    this.totalSquares -= this.docLen[d] * this.docLen[d];
    const n = this.listsOf(d);
    for (let i = 0; i < n; i++) this.listById[this.termIds[i]].live--;
    this.entityLive[this.docEntity[d]]--;
    if (++this.dead > this.compactAfter && this.dead > this.live && this.frozen === 0) this.compact();
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

  /** Its live documents and lists as they are now, for a snapshot (snapshot.ts: freezeTable). */
  freeze(): FrozenSpace {
    return freezeTable(this.expanded());
  }

  /** A space of the documents and lists of `p` (its arrays are used, not copied: they may be a mapped file's). */
  static fromParts(p: SpaceParts, compactAfter?: number): KeywordSpace {
    const s = new KeywordSpace(compactAfter);
    thaw(s, p);
    s.countLists();
    return s;
  }

  /** Drops spare room in every array (after a first load). */
  trim() {
    if (this.small !== undefined) {
      this.small.trim();
      return;
    }
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
    this.countLists();
    // (Lists left empty were dropped: a term's number may name one no longer in the Map.)
    this.wordKeys = this.wordLists = EMPTY_DOCS;
    this.wordCount = 0;
  }
}

/**
 * Up to how many documents a space made `packed` keeps them so: each document's id and terms as
 * a binary record, all in one array (packed.ts), and no lists. A list per term costs ~500 bytes of objects however few its
 * postings, so a namespace of 50 memories held ~280 KB of lists against ~13 KB for 50 memories'
 * share of a namespace of 100,000 (issue 32); packed, a small namespace costs memory in
 * proportion to what it holds, and a search makes the lists of that moment (KeywordSpace.expanded:
 * ~0.5 ms at 256 documents). Past it the space unpacks, for good (tests make it small).
 */
export const packing = { upTo: 256 };
/** bytes(): what an object, a list, an entity, an id kept aside and a packed document take besides their arrays and text. */
const SPACE_BYTES = 1024;
const LIST_BYTES = 400;
const ENTITY_BYTES = 150;
const OTHER_ID_BYTES = 100;
/** addText's scratch: the terms' numbers, the distinct terms' lists. */
const scratchIds: number[] = [];
const scratchLists: List[] = [];
const wordHash = (word: number) => {
  const h = Math.imul(word ^ (word >>> 15), 0x2c1b3c6d);
  return h ^ (h >>> 12);
};

export type { DocTerms };

export function packTerms(content: string, createdAt: number, entity: string): DocTerms {
  return packFrom(indexTerms(content), createdAt, entity);
}

/** A memory's DocTerms from its terms in order (indexTerms). */
function packFrom(terms: string[], createdAt: number, entity: string): DocTerms {
  const v: DocTerms = [terms.length, createdAt, entity];
  if (terms.length > 32) {
    for (const [term, n] of termFrequencies(terms)) v.push(term, n);
    return v;
  }
  // (Few terms: counted in place, first seen first as the Map would; a Map per memory cost most
  // of the CPU of following a bulk load's stores.)
  for (const t of terms) {
    let j = 3;
    while (j < v.length && v[j] !== t) j += 2;
    if (j < v.length) (v[j + 1] as number)++;
    else v.push(t, 1);
  }
  return v;
}
