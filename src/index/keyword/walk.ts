// A namespace's best documents for a query, document at a time by MaxScore over cursors on the
// query's lists (search.ts decides the scope and the terms).
import { bm25n, type LengthNorm } from "../../text/scoring";
import { type List, NONE, SKY } from "./lists";
import type { KeywordSpace } from "./space";

/** A query term that occurs in the scope, with its list, weight and idf (times its weight). */
export type QueryTerm = { term: string; list: List; weight: number; idf: number };

/**
 * Whether a candidate is returned: the caller's record of it when it is current, in the scope
 * and passes the search's filter, else null (the caller reads its store; asked once per id a
 * search).
 */
export type Accept<R> = (id: string) => R | null;

/** A document returned: the caller's record of it (`accept`'s) and its score. */
export type Hit<R> = { memory: R; score: number };

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
function boundOf(sky: Int32Array, skyTf: number, w: number, avg: LengthNorm): number {
  let most = 0;
  for (let t = 1; t < SKY; t++) if (sky[t] !== NONE) most = Math.max(most, bm25n(w, t, sky[t], avg));
  if (sky[SKY] !== NONE) most = Math.max(most, bm25n(w, skyTf, sky[SKY], avg));
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
export function namespaceTop<R>(
  space: KeywordSpace,
  ts: QueryTerm[],
  avg: LengthNorm,
  limit: number,
  accept: Accept<R>,
): Hit<R>[] {
  const m = ts.length;
  const w = Float64Array.from(ts, (t) => t.idf);
  // Most postings have tf 1: their contribution by length, from a table.
  const ones = ts.map((t) => {
    const one = new Float64Array(t.list.maxLen + 1);
    for (let l = 0; l < one.length; l++) one[l] = bm25n(t.idf, 1, l, avg);
    return one;
  });
  const bounds = Float64Array.from(ts, (t) => boundOf(space.skylineOf(t.list), t.list.skyTf, t.idf, avg));
  // The lists by bound, lowest first (ties by their order in ts), and the sums of those bounds.
  const order = Int32Array.from(ts.keys()).sort((a, b) => bounds[a] - bounds[b] || a - b);
  const below = new Float64Array(m + 1);
  for (let e = 0; e < m; e++) below[e + 1] = below[e] + bounds[order[e]];
  for (const check of [undefined, accept]) {
    const top = maxScore(space, ts, w, ones, bounds, order, below, avg, limit, check);
    const out: Hit<R>[] = [];
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
    private readonly accept: Accept<unknown> | undefined,
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
  avg: LengthNorm,
  limit: number,
  accept: Accept<unknown> | undefined,
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
  avg: LengthNorm,
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
    parts[seed] = tf0 === 1 ? ones[seed][len] : bm25n(w[seed], tf0, len, avg);
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
        const p = tf === 1 ? ones[q][len] : bm25n(w[q], tf, len, avg);
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
  avg: LengthNorm,
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
        const p = tf === 1 ? ones[q][len] : bm25n(w[q], tf, len, avg);
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
        const p = tf === 1 ? ones[q][len] : bm25n(w[q], tf, len, avg);
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
