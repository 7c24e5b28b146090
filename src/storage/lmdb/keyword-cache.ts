// The postings of a namespace held in memory as typed arrays, so a namespace-wide keyword search
// over common words scores hundreds of thousands of postings in a few milliseconds instead of
// reading each out of LMDB. Built from the LMDB postings on the namespace's first search, and
// kept in step by the storage after each committed write that changed the keyword index (it
// re-reads those memories from LMDB and indexes what is current, so it follows the committed
// state whatever order commits land in). LMDB stays the index of record: df and document
// statistics are read from it at every search, and every candidate is checked against its
// memory record, so a memory that is no longer current is never returned.
import { termCounts } from "../../text/tokens";
import type { MemoryRecord } from "../records";
import type { Dbs } from "./index";
import { END } from "./layout";

/** One term's postings: document numbers with tf and length, in insertion order. */
class List {
  n = 0;
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
  }
}

/** A namespace's postings. Document numbers are this process's own; a changed memory gets a new one. */
export class KeywordSpace {
  /** Document number -> memory id; "" once the document is gone. */
  ids: string[] = [];
  /** Scratch for a search: a score per document number, zero between searches. */
  scores = new Float64Array(0);
  private readonly docOf = new Map<string, number>();
  readonly lists = new Map<string, List>();
  private dead = 0;

  add(id: string, tf: Map<string, number>, length: number) {
    this.remove(id);
    const d = this.ids.length;
    this.ids.push(id);
    this.docOf.set(id, d);
    for (const [term, n] of tf) {
      let l = this.lists.get(term);
      if (!l) {
        l = new List();
        this.lists.set(term, l);
      }
      l.push(d, n, length);
    }
  }

  remove(id: string) {
    const d = this.docOf.get(id);
    if (d === undefined) return;
    this.docOf.delete(id);
    this.ids[d] = "";
    if (++this.dead > 10000 && this.dead > this.docOf.size) this.compact();
  }

  /** Drops the postings of gone documents and renumbers the rest. */
  private compact() {
    const renumber = new Int32Array(this.ids.length).fill(-1);
    const ids: string[] = [];
    for (let d = 0; d < this.ids.length; d++)
      if (this.ids[d] !== "") {
        renumber[d] = ids.length;
        this.docOf.set(this.ids[d], ids.length);
        ids.push(this.ids[d]);
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
    this.ids = ids;
    this.dead = 0;
  }
}

/** The in-memory postings of every namespace searched so far. */
export class KeywordCache {
  private readonly spaces = new Map<string, KeywordSpace>();
  constructor(private readonly dbs: Dbs) {}

  /** The namespace's postings, loaded from LMDB the first time. */
  space(namespace: string): KeywordSpace {
    let s = this.spaces.get(namespace);
    if (s) return s;
    s = new KeywordSpace();
    // One pass over the namespace's postings ([namespace, term, entity, id] -> [tf, length]).
    const docs = new Map<string, [string, number][]>();
    const lengths = new Map<string, number>();
    for (const { key, value } of this.dbs.postings.getRange({ start: [namespace], end: [namespace, END] })) {
      const [, term, , id] = key as [string, string, string, string];
      const [tf, len] = value as [number, number];
      let d = docs.get(id);
      if (!d) {
        d = [];
        docs.set(id, d);
        lengths.set(id, len);
      }
      d.push([term, tf]);
    }
    for (const [id, terms] of docs) s.add(id, new Map(terms), lengths.get(id)!);
    this.spaces.set(namespace, s);
    return s;
  }

  /** After a committed write: re-indexes the memories whose keyword index it changed, as they now are. */
  refresh(touched: readonly (readonly [string, string])[]) {
    if (touched.length === 0 || this.spaces.size === 0) return;
    for (const [ns, id] of touched) {
      const s = this.spaces.get(ns);
      if (!s) continue;
      const r = this.dbs.memories.get(id) as MemoryRecord | undefined;
      // Indexed in LMDB exactly while its state is current (an expired one until the sweep).
      if (r?.state === "current" && r.namespace === ns) {
        const { tf, length } = termCounts(r.content);
        s.add(id, tf, length);
      } else s.remove(id);
    }
  }

  /** Forgets every namespace (after a rebuild). */
  clear() {
    this.spaces.clear();
  }
}
