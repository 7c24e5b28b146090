// The inverted index of a namespace, in memory: per term a list of (document, tf, length) in
// typed arrays, so a namespace-wide keyword search over common words scores hundreds of thousands
// of postings in a few milliseconds. LMDB holds what it is built from: the namespace's current
// memories (namespace_memories, written in the apply transaction) and their records, whose
// content is tokenized here (format 6; format 5 stored the terms, at 3-5 µs of a raw store's
// CPU, for namespaces never searched too). It is built on the namespace's first search (in
// slices: touched.ts) and kept in step by the storage after each committed write that changed it
// (it re-reads those memories from LMDB and indexes what is current, so it follows the committed
// state whatever order commits land in).
// Document counts and lengths are summed here. Every candidate is checked against its memory
// record, so a memory that is no longer current is never returned.
import { termCounts } from "../../text/tokens";
import type { MemoryRecord } from "../records";
import type { Dbs } from "./index";
import { loadSlice, NamespaceCache } from "./touched";

const grown = <T extends Int32Array | Float64Array | Uint8Array>(a: T, size: number): T => {
  if (size <= a.length) return a;
  const b = new (a.constructor as new (n: number) => T)(Math.max(size, a.length * 2));
  b.set(a);
  return b;
};

/** One term's postings, in insertion order; `live` counts those of documents not gone (its df). */
export class List {
  n = 0;
  live = 0;
  doc = new Int32Array(4);
  tf = new Int32Array(4);
  len = new Int32Array(4);
  /** The longest document ever pushed. */
  maxLen = 0;
  constructor(readonly id: number) {}
  push(d: number, tf: number, len: number) {
    if (this.n === this.doc.length) {
      this.doc = grown(this.doc, this.n + 1);
      this.tf = grown(this.tf, this.n + 1);
      this.len = grown(this.len, this.n + 1);
    }
    if (len > this.maxLen) this.maxLen = len;
    this.doc[this.n] = d;
    this.tf[this.n] = tf;
    this.len[this.n] = len;
    this.n++;
    this.live++;
  }
}

/**
 * A namespace's postings. Document numbers are this process's own; a changed memory gets a new
 * one. Per document: its (list id, tf) pairs in one shared pool, so a document is no object.
 */
export class KeywordSpace {
  /** Document number -> memory id ("" once gone). */
  ids: string[] = [];
  /** Document number -> 1 once the document is gone. */
  gone = new Uint8Array(1024);
  /** Document number -> its length, creation time, and where its pairs start in `pool`. */
  docLen = new Int32Array(1024);
  docCreated = new Float64Array(1024);
  docStart = new Int32Array(1025);
  /** (list id, tf) pairs of every document, in document order. */
  pool = new Int32Array(8192);
  private docEntity: (Set<number> | undefined)[] = [];
  /** Entity -> its documents. */
  readonly byEntity = new Map<string, Set<number>>();
  private readonly docOf = new Map<string, number>();
  /** The sum of the live documents' lengths (their number is docOf's size). */
  private totalLength = 0;
  readonly lists = new Map<string, List>();
  private listById: List[] = [];
  /** Scratch for a search: a score per document number (zero between searches), touched ones. */
  scores = new Float64Array(0);
  touched = new Int32Array(0);
  values = new Float64Array(0);
  private dead = 0;
  /** Compacts once more than this many documents (and more than half) are gone. */
  constructor(private readonly compactAfter = 10000) {}

  /** Live documents and their total length: BM25's N and average length over the namespace. */
  get stats(): { docs: number; totalLength: number } {
    return { docs: this.docOf.size, totalLength: this.totalLength };
  }

  /** Adds a memory from its stored terms (DocTerms: [length, createdAt, entity, term, tf, ...]). */
  add(id: string, v: DocTerms, isNew = false) {
    if (!isNew) this.remove(id);
    const entity = v[2] as string;
    const d = this.ids.length;
    const length = v[0] as number;
    if (d + 2 > this.docStart.length) {
      this.gone = grown(this.gone, d + 1);
      this.docLen = grown(this.docLen, d + 1);
      this.docCreated = grown(this.docCreated, d + 1);
      this.docStart = grown(this.docStart, d + 2);
    }
    const start = this.docStart[d];
    const end = start + (v.length - 3);
    if (end > this.pool.length) this.pool = grown(this.pool, end);
    this.ids.push(id);
    this.docOf.set(id, d);
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
      l.push(d, v[i + 1] as number, length);
      this.pool[k++] = l.id;
      this.pool[k++] = v[i + 1] as number;
    }
    this.docStart[d + 1] = end;
    let set = this.byEntity.get(entity);
    if (!set) {
      set = new Set();
      this.byEntity.set(entity, set);
    }
    set.add(d);
    this.docEntity.push(set);
  }

  remove(id: string) {
    const d = this.docOf.get(id);
    if (d === undefined) return;
    this.docOf.delete(id);
    this.ids[d] = "";
    this.gone[d] = 1;
    this.totalLength -= this.docLen[d];
    for (let k = this.docStart[d]; k < this.docStart[d + 1]; k += 2) this.listById[this.pool[k]].live--;
    this.docEntity[d]!.delete(d);
    this.docEntity[d] = undefined;
    if (++this.dead > this.compactAfter && this.dead > this.docOf.size) this.compact();
  }

  /** Drops gone documents and renumbers the rest; lists left empty are dropped. */
  private compact() {
    const old = { ids: this.ids, docLen: this.docLen, docCreated: this.docCreated, docStart: this.docStart };
    const pool = this.pool;
    const docEntity = this.docEntity;
    const renumber = new Int32Array(old.ids.length).fill(-1);
    this.ids = [];
    this.docEntity = [];
    this.docLen = new Int32Array(old.docLen.length);
    this.docCreated = new Float64Array(old.docCreated.length);
    this.docStart = new Int32Array(old.docStart.length);
    this.pool = new Int32Array(pool.length);
    for (let d = 0; d < old.ids.length; d++) {
      if (this.gone[d]) continue;
      const e = this.ids.length;
      renumber[d] = e;
      this.docOf.set(old.ids[d], e);
      this.ids.push(old.ids[d]);
      this.docEntity.push(docEntity[d]);
      this.docLen[e] = old.docLen[d];
      this.docCreated[e] = old.docCreated[d];
      const from = old.docStart[d];
      const to = old.docStart[d + 1];
      this.pool.set(pool.subarray(from, to), this.docStart[e]);
      this.docStart[e + 1] = this.docStart[e] + (to - from);
    }
    for (const [term, l] of this.lists) {
      let k = 0;
      for (let i = 0; i < l.n; i++) {
        const d = renumber[l.doc[i]];
        if (d < 0) continue;
        l.doc[k] = d;
        l.tf[k] = l.tf[i];
        l.len[k] = l.len[i];
        k++;
      }
      l.n = k;
      if (k === 0) this.lists.delete(term);
    }
    for (const [entity, set] of this.byEntity) {
      const docs = [...set];
      set.clear();
      for (const d of docs) set.add(renumber[d]);
      if (set.size === 0) this.byEntity.delete(entity);
    }
    this.gone = new Uint8Array(this.gone.length);
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

/** The in-memory postings of every namespace searched so far. */
export type KeywordCache = NamespaceCache<KeywordSpace, DocTerms>;

export function keywordCache(dbs: Dbs): KeywordCache {
  /**
   * A memory's terms, from its record, if namespace_memories lists it under `namespace`: a memory
   * is listed exactly while its record is current (both written in one transaction), and never
   * changes namespace, so the record alone answers.
   */
  const termsOf = (namespace: string, id: string): DocTerms | undefined => {
    const r = dbs.memories.get(id) as MemoryRecord | undefined;
    return r?.state === "current" && r.namespace === namespace
      ? packTerms(r.content, r.createdAt, r.entity)
      : undefined;
  };
  return new NamespaceCache<KeywordSpace, DocTerms>({
    empty: () => new KeywordSpace(),
    load: (s, ns, after, limit) =>
      loadSlice(dbs.namespaceMemories, ns, after, limit, (key) => {
        const terms = termsOf(ns, key[1] as string);
        if (terms) s.add(key[1] as string, terms, true);
      }),
    keep: (s) => s.stats.docs > 0,
    read: ([ns, , id]) => termsOf(ns, id),
    drop: (s, [, , id]) => s.remove(id),
    put: (s, [, , id], terms) => s.add(id, terms),
  });
}
