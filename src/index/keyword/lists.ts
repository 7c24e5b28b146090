// A term's postings in a keyword space: (document, tf) pairs in typed arrays, in document order
// (6 bytes a posting), with the bound MaxScore needs of what the term can add to a score (its
// skyline); and the growing typed arrays the space is made of.
export type Typed = Int32Array | Uint16Array | Uint8Array | Float64Array;
/**
 * `a`, or a copy with room for `size` items: twice as long while small, an eighth longer once
 * large (a doubling would leave half of a big array unused: after a snapshot is read, the first
 * change copies each per-document array out of the mapped file).
 */
export const grown = <T extends Typed>(a: T, size: number): T => {
  if (size <= a.length) return a;
  const more = a.length < 1 << 16 ? Math.max(a.length, 4) : a.length >> 3;
  const b = new (a.constructor as new (n: number) => T)(Math.max(size, a.length + more));
  b.set(a);
  return b;
};
/** A copy of the first n items, without spare room. */
export const trimmed = <T extends Typed>(a: T, n: number): T => {
  const b = new (a.constructor as new (n: number) => T)(n);
  b.set(a.subarray(0, n));
  return b;
};

/** Most a tf can be (more occurrences count as this many: BM25 saturates long before). */
export const MAX_TF = 65535;

/** A list's skyline holds tfs 1 to SKY - 1 one by one, and the rest together (List.sky). */
export const SKY = 8;
export const NONE = 0x7fffffff;

export const EMPTY_DOCS = new Int32Array(0);
export const EMPTY_TFS = new Uint16Array(0);

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
  /** A document's occurrences of the term counted so far, while KeywordSpace.addText adds it (0 otherwise). */
  pending = 0;
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
