// The inverted index of a namespace, in memory: per term a list of (document, tf, length) in
// typed arrays, so a namespace-wide keyword search over common words scores hundreds of thousands
// of postings in a few milliseconds. LMDB holds the index of record (each memory's terms in one
// value, and the document counts and lengths: layout.ts), written in the apply transaction; this
// is built from it on the namespace's first search and kept in step by the storage after each
// committed write that changed it (it re-reads those memories from LMDB and indexes what is
// current, so it follows the committed state whatever order commits land in). Every candidate is
// checked against its memory record, so a memory that is no longer current is never returned.
import type { MemoryRecord } from "../records";
import type { Dbs } from "./index";
import { END } from "./layout";

/** One term's postings, in insertion order; `live` counts those of documents not gone (its df). */
export class List {
  n = 0;
  live = 0;
  doc = new Int32Array(4);
  tf = new Int32Array(4);
  len = new Int32Array(4);
  push(d: number, tf: number, len: number) {
    if (this.n === this.doc.length) {
      const grow = (a: Int32Array) => {
        const b = new Int32Array(a.length * 2);
        b.set(a);
        return b;
      };
      this.doc = grow(this.doc);
      this.tf = grow(this.tf);
      this.len = grow(this.len);
    }
    this.doc[this.n] = d;
    this.tf[this.n] = tf;
    this.len[this.n] = len;
    this.n++;
    this.live++;
  }
}

/** A namespace's postings. Document numbers are this process's own; a changed memory gets a new one. */
export class KeywordSpace {
  /** Document number -> memory id ("" once gone). */
  ids: string[] = [];
  /** Document number -> 1 once the document is gone. */
  gone = new Uint8Array(1024);
  /** Document number -> its length, creation time, the lists holding it and its tf in each. */
  docLen = new Int32Array(1024);
  docCreated = new Float64Array(1024);
  docLists: (List[] | undefined)[] = [];
  docTf: (Int32Array | undefined)[] = [];
  private docEntity: (Set<number> | undefined)[] = [];
  /** Entity -> its documents. */
  readonly byEntity = new Map<string, Set<number>>();
  private readonly docOf = new Map<string, number>();
  readonly lists = new Map<string, List>();
  /** Scratch for a search: a score per document number (zero between searches), touched ones. */
  scores = new Float64Array(0);
  touched = new Int32Array(0);
  values = new Float64Array(0);
  private dead = 0;

  add(id: string, entity: string, tf: Map<string, number>, length: number, createdAt: number) {
    this.remove(id);
    const d = this.ids.length;
    if (d >= this.gone.length) {
      const gone = new Uint8Array(this.gone.length * 2);
      gone.set(this.gone);
      this.gone = gone;
      const docLen = new Int32Array(this.docLen.length * 2);
      docLen.set(this.docLen);
      this.docLen = docLen;
      const docCreated = new Float64Array(this.docCreated.length * 2);
      docCreated.set(this.docCreated);
      this.docCreated = docCreated;
    }
    this.ids.push(id);
    this.docOf.set(id, d);
    this.docLen[d] = length;
    this.docCreated[d] = createdAt;
    const held: List[] = [];
    const tfs = new Int32Array(tf.size);
    for (const [term, n] of tf) {
      let l = this.lists.get(term);
      if (!l) {
        l = new List();
        this.lists.set(term, l);
      }
      l.push(d, n, length);
      tfs[held.length] = n;
      held.push(l);
    }
    this.docLists.push(held);
    this.docTf.push(tfs);
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
    for (const l of this.docLists[d]!) l.live--;
    this.docLists[d] = undefined;
    this.docTf[d] = undefined;
    this.docEntity[d]!.delete(d);
    this.docEntity[d] = undefined;
    if (++this.dead > 10000 && this.dead > this.docOf.size) this.compact();
  }

  /** Drops the postings of gone documents and renumbers the rest. */
  private compact() {
    const renumber = new Int32Array(this.ids.length).fill(-1);
    const ids: string[] = [];
    const docLists: (List[] | undefined)[] = [];
    const docTf: (Int32Array | undefined)[] = [];
    const docEntity: (Set<number> | undefined)[] = [];
    const docLen = new Int32Array(this.docLen.length);
    const docCreated = new Float64Array(this.docCreated.length);
    for (let d = 0; d < this.ids.length; d++)
      if (!this.gone[d]) {
        const e = ids.length;
        renumber[d] = e;
        this.docOf.set(this.ids[d], e);
        ids.push(this.ids[d]);
        docLists.push(this.docLists[d]);
        docTf.push(this.docTf[d]);
        docEntity.push(this.docEntity[d]);
        docLen[e] = this.docLen[d];
        docCreated[e] = this.docCreated[d];
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
    this.ids = ids;
    this.docLists = docLists;
    this.docTf = docTf;
    this.docEntity = docEntity;
    this.docLen = docLen;
    this.docCreated = docCreated;
    this.gone = new Uint8Array(this.gone.length);
    this.dead = 0;
  }
}

/** A memory's indexed terms as stored in LMDB: [length, createdAt, term, tf, term, tf, ...]. */
export type DocTerms = (string | number)[];

export function packTerms(tf: Map<string, number>, length: number, createdAt: number): DocTerms {
  const v: DocTerms = [length, createdAt];
  for (const [term, n] of tf) v.push(term, n);
  return v;
}

export function unpackTerms(v: DocTerms): { tf: Map<string, number>; length: number; createdAt: number } {
  const tf = new Map<string, number>();
  for (let i = 2; i < v.length; i += 2) tf.set(v[i] as string, v[i + 1] as number);
  return { tf, length: v[0] as number, createdAt: v[1] as number };
}

/** The in-memory postings of every namespace searched so far. */
export class KeywordCache {
  private readonly spaces = new Map<string, KeywordSpace>();
  constructor(private readonly dbs: Dbs) {}

  /** The namespace's postings, built from LMDB the first time. */
  space(namespace: string): KeywordSpace {
    let s = this.spaces.get(namespace);
    if (s) return s;
    s = new KeywordSpace();
    for (const { key, value } of this.dbs.docTerms.getRange({ start: [namespace], end: [namespace, END] })) {
      const { tf, length, createdAt } = unpackTerms(value as DocTerms);
      s.add((key as string[])[2], (key as string[])[1], tf, length, createdAt);
    }
    this.spaces.set(namespace, s);
    return s;
  }

  /** After a committed write: re-indexes the memories whose keyword index it changed, as they now are. */
  refresh(touched: readonly (readonly [string, string])[]) {
    if (touched.length === 0 || this.spaces.size === 0) return;
    for (const [ns, id] of touched) {
      const s = this.spaces.get(ns);
      if (!s) continue;
      // What LMDB now holds for it: its terms while current (an expired one until the sweep).
      const r = this.dbs.memories.get(id) as MemoryRecord | undefined;
      const v = r && (this.dbs.docTerms.get([ns, r.entity, id]) as DocTerms | undefined);
      if (v && r.state === "current") {
        const { tf, length, createdAt } = unpackTerms(v);
        s.add(id, r.entity, tf, length, createdAt);
      } else s.remove(id);
    }
  }

  /** Forgets every namespace (after a rebuild). */
  clear() {
    this.spaces.clear();
  }
}
