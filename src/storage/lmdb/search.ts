// The LMDB search index: BM25 postings and their statistics, vectors and the embedding queue,
// kept in the write transaction of the change they follow (see layout.ts for the keys).
import { bm25, bm25Bound, idf, type QueryTerm as Term } from "../../text/scoring";
import { byScoreThenNewer, matchesFilter, normalized } from "../ops";
import { isCurrent, type MemoryRecord } from "../records";
import type { MemoryScope, Scored, Search, SearchFilter, VectorUpdate } from "../storage";
import { ann, type VectorSpace } from "../vector-space";
import type { KeywordSpace, List } from "./keyword-cache";
import { type Dbs, keys } from "./layout";
import type { Writes } from "./staging";
import type { LmdbState } from "./state";

/**
 * Stages index changes for one write transaction and notes what they touched, so the in-memory
 * lists and vectors can follow the commit.
 */
export class IndexWriter {
  private static collecting: IndexWriter[] | undefined;
  /** Runs `fn` (synchronous), adding every IndexWriter it makes to `into`. */
  static collect<T>(into: IndexWriter[], fn: () => T): T {
    const outer = IndexWriter.collecting;
    IndexWriter.collecting = into;
    try {
      return fn();
    } finally {
      IndexWriter.collecting = outer;
    }
  }
  /** The memories whose keyword index this transaction changed, for keyword-cache.ts. */
  readonly keywordTouched: [string, string, string][] = [];
  /** The vector keys this transaction wrote or removed, for the in-memory vectors (vector-cache.ts). */
  readonly vectorsTouched: [string, string, string][] = [];
  /**
   * `follow` false (bench/search.ts's index-off baseline only): the in-memory lists are not told
   * of the change.
   */
  constructor(
    private readonly dbs: Dbs,
    private readonly w: Writes,
    private readonly follow = true,
  ) {
    IndexWriter.collecting?.push(this);
  }

  /**
   * Lists (sign 1) or unlists (sign -1) a current memory in namespace_memories. Its terms are
   * not stored: the in-memory lists tokenize its record when they load or follow it.
   */
  private change(r: MemoryRecord, sign: 1 | -1) {
    const key = keys.namespaceMemory(r.namespace, r.id);
    if (sign < 0) this.w.remove(this.dbs.namespaceMemories, key);
    else this.w.put(this.dbs.namespaceMemories, key, null);
    if (this.follow) this.keywordTouched.push([r.namespace, r.entity, r.id]);
  }

  /** Indexes a current memory's content. */
  add(r: MemoryRecord) {
    this.change(r, 1);
  }
  /** Unindexes a memory's content as it was indexed. */
  remove(r: MemoryRecord) {
    this.change(r, -1);
  }

  /** Applies an op's vector to a memory that is (still) current. */
  setVector(r: MemoryRecord, v: VectorUpdate | undefined) {
    const key = keys.vector(r.namespace, r.entity, r.id);
    this.vectorsTouched.push([r.namespace, r.entity, r.id]);
    if (v === "pending") {
      this.w.remove(this.dbs.vectors, key);
      this.w.put(this.dbs.embedPending, r.id, null);
    } else {
      this.w.remove(this.dbs.embedPending, r.id);
      if (v === undefined) this.w.remove(this.dbs.vectors, key);
      else this.w.put(this.dbs.vectors, key, Buffer.from(normalized(v).buffer));
    }
  }

  /** Drops a retired memory's vector and queue entry. */
  dropVector(r: MemoryRecord) {
    this.vectorsTouched.push([r.namespace, r.entity, r.id]);
    this.w.remove(this.dbs.vectors, keys.vector(r.namespace, r.entity, r.id));
    this.w.remove(this.dbs.embedPending, r.id);
  }
}

/**
 * Keeps the index in step with one planned change: `before` is the memory as it was (undefined
 * for a new one), `after` as it is now, `vector` what the op says about its embedding.
 */
export function indexChange(
  ix: IndexWriter,
  before: MemoryRecord | undefined,
  after: MemoryRecord,
  vector: VectorUpdate | undefined,
) {
  const was = before?.state === "current";
  const is = after.state === "current";
  const changed = !was || !is || before!.content !== after.content;
  if (!changed) return;
  if (was) ix.remove(before!);
  if (is) {
    ix.add(after);
    if (was || vector !== undefined) ix.setVector(after, vector);
  } else if (was) ix.dropVector(before!);
}

const EMPTY: Scored[] = [];

/** Completing a candidate costs about this many postings walked (tests set 0: always prune). */
export const pruning = { survivorCost: 4 };

/** A query term that occurs in the scope, with its list, weight and idf (times its weight). */
type QueryTerm = { term: string; list: List; weight: number; idf: number };
type Accept = (id: string) => MemoryRecord | null;

/**
 * BM25 top-k over a scope, exact (k1, b and the terms' weights: text/scoring.ts), on the namespace's in-memory lists
 * (keyword-cache.ts), whose document counts and lengths are those of the same state. Over a
 * namespace, term at a time over the query's lists, df being a list's live count; over an entity,
 * each of its documents is looked at once, df counted there. Every candidate is checked against
 * its record. The two scopes are separate functions, and so is the loop over a list: a process
 * that first ran many small entity searches made one function's compiled code 3× slower for
 * namespace searches (JSC specialises a function for what it has seen).
 */
export function keywordSearch(
  dbs: Dbs,
  space: KeywordSpace,
  scope: MemoryScope,
  terms: readonly Term[],
  filter: SearchFilter,
  limit: number,
  now: number,
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
      const m = dbs.memories.get(id) as MemoryRecord | undefined;
      r = isCurrent(m, now) && m.namespace === scope.namespace && matchesFilter(m, filter) ? m : null;
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
  const n = space.count;
  if (space.scores.length < n) {
    const room = Math.max(1024, n + (n >> 3));
    space.scores = new Float64Array(room);
    space.touched = new Int32Array(room);
    space.values = new Float64Array(room);
  }
  const count = docsOf
    ? entityCandidates(space, docsOf, ts, docs, avg)
    : namespaceCandidates(space, ts, avg, limit, accept);
  return pickAccepted(space, count, limit, accept);
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
    for (let k = space.docStart[d]; k < space.docStart[d + 1]; k++) {
      const q = listIds.indexOf(space.poolList[k]);
      if (q < 0) continue;
      if (!found) hits.push(d);
      found = true;
      hits.push(q, space.poolTf[k]);
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
 * A namespace's candidates into (space.touched, space.values), by MaxScore, term at a time over
 * the in-memory lists, rarest first. Once the `limit`-th best accepted score so far (theta) beats
 * what the remaining lists could add together, they are not walked: a document only they hold
 * cannot reach the top, and the candidates that still can are completed from their own term
 * lists. Returns how many.
 */
function namespaceCandidates(space: KeywordSpace, ts: QueryTerm[], avg: number, limit: number, accept: Accept) {
  const { scores: acc, touched, values } = space;
  const lists = ts.map((t) => t.list);
  let count = 0;
  const bounds = ts.map((t) => bm25Bound(t.idf));
  const rest = (from: number) => bounds.slice(from).reduce((x, y) => x + y, 0);
  /**
   * A lower bound of the final `limit`-th best accepted score: the `limit`-th best accepted
   * partial score among the touched documents (-Infinity if fewer). Ties need no order here.
   */
  const theta = () => {
    for (let i = 0; i < count; i++) values[i] = acc[touched[i]];
    for (let want = limit * 2 + 16; ; want *= 4) {
      const order = bestValues(values, count, want);
      let k = 0;
      for (const j of order) if (accept(space.idOf(touched[j])) && ++k === limit) return values[j];
      if (order.length >= count) return Number.NEGATIVE_INFINITY;
    }
  };
  let q = 0;
  /** Candidates below this cannot reach the top once the remaining lists are skipped. */
  let cut = Number.NEGATIVE_INFINITY;
  for (; q < ts.length; q++) {
    // theta is at most the sum of the bounds walked so far: only then is it worth computing.
    if (q > 0 && count >= limit && rest(q) < rest(0) - rest(q)) {
      const th = theta();
      // (The slack keeps rounding from ever dropping a document that could tie.)
      if (rest(q) + 1e-9 < th) {
        const c = th - rest(q) - 1e-9;
        // Completing a candidate reads its own terms: worth it only when few remain.
        let survivors = 0;
        for (let i = 0; i < count; i++) if (acc[touched[i]] >= c) survivors++;
        let left = 0;
        for (let j = q; j < ts.length; j++) left += lists[j].n;
        if (survivors * pruning.survivorCost < left) {
          cut = c;
          break;
        }
      }
    }
    count = addList(space, lists[q], ts[q].idf, avg, count);
  }
  if (q === ts.length) {
    for (let i = 0; i < count; i++) {
      values[i] = acc[touched[i]];
      acc[touched[i]] = 0;
    }
    return count;
  }
  // Complete the candidates that can still reach the top from their own lists.
  const late = lists.slice(q);
  let kept = 0;
  for (let i = 0; i < count; i++) {
    const d = touched[i];
    let s = acc[d];
    acc[d] = 0;
    if (s < cut) continue;
    for (let j = 0; j < late.length; j++)
      for (let k = space.docStart[d]; k < space.docStart[d + 1]; k++)
        if (space.poolList[k] === late[j].id) s += bm25(ts[q + j].idf, space.poolTf[k], space.docLen[d], avg);
    touched[kept] = d;
    values[kept++] = s;
  }
  return kept;
}

/**
 * Adds one list's BM25 contributions to the accumulators (space.scores), noting documents seen
 * for the first time in space.touched from `count` on; returns the new count.
 */
function addList(space: KeywordSpace, list: List, w: number, avg: number, count: number): number {
  const { scores: acc, touched, gone, docLen } = space;
  const { doc, tf } = list;
  // Most postings have tf 1: their contribution by length, from a table.
  const one = new Float64Array(list.maxLen + 1);
  for (let l = 0; l < one.length; l++) one[l] = bm25(w, 1, l, avg);
  for (let i = 0; i < list.n; i++) {
    const d = doc[i];
    if (gone[d]) continue;
    const before = acc[d];
    if (before === 0) touched[count++] = d;
    const l = docLen[d];
    acc[d] = before + (tf[i] === 1 ? one[l] : bm25(w, tf[i], l, avg));
  }
  return count;
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

/** The best `limit` accepted candidates, ties newer first (ties at the cut are all looked at). */
function topAccepted(
  scores: Map<string, number>,
  accept: (id: string) => MemoryRecord | null,
  limit: number,
): Scored[] {
  const sorted = [...scores].sort((a, b) => b[1] - a[1]);
  const out: Scored[] = [];
  for (const [id, score] of sorted) {
    if (out.length >= limit && score < out[limit - 1].score) break;
    const m = accept(id);
    if (m) out.push({ memory: m, score });
  }
  return out.sort(byScoreThenNewer).slice(0, limit);
}

/**
 * Cosine top-k over a scope, on the namespace's in-memory codes (../vector-space.ts, vector-cache.ts): the candidates
 * it offers carry exact scores, read from LMDB; exact for a scope of at most `ann.rescore`
 * vectors, approximate (the nearest codes) beyond. Candidates are checked against their memory
 * record, so a memory that is no longer current is never returned; when too few pass, more are
 * asked for, up to the whole scope.
 */
export function semanticSearch(
  dbs: Dbs,
  space: VectorSpace,
  scope: MemoryScope,
  query: Float32Array,
  filter: SearchFilter,
  limit: number,
  now: number,
): Scored[] {
  const q = normalized(query);
  const scores = new Map<string, number>();
  const accept = (id: string) => {
    const m = dbs.memories.get(id) as MemoryRecord | undefined;
    return isCurrent(m, now) && m.namespace === scope.namespace && matchesFilter(m, filter) ? m : null;
  };
  for (let want = Math.max(limit * 4 + 16, ann.rescore); ; want *= 4) {
    const { ids, sims, all } = space.nearest(scope.entity, q, want);
    // Only the best few are worth sorting and checking: widen until `limit` pass or all are seen.
    for (let check = limit * 4 + 16; ; check *= 4) {
      const order = topIndexes(sims, check);
      scores.clear();
      for (const j of order) scores.set(ids[j], sims[j]);
      const out = topAccepted(scores, accept, limit);
      if (out.length >= limit) return out;
      if (order.length >= sims.length) {
        if (all) return out;
        break;
      }
    }
  }
}

/** Indexes of `k` largest of the first `n` values (ties broken anyhow), best first. */
function bestValues(values: Float64Array, n: number, k: number): number[] {
  return topIndexes(values, k, n)
    .sort((a, b) => values[b] - values[a])
    .slice(0, k);
}

/**
 * Indexes of the `k` largest of the first `n` values and of any equal to the k-th (all when
 * k ≥ n), unordered.
 */
function topIndexes(values: Float32Array | Float64Array, k: number, n = values.length): number[] {
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

/** The Search role: each namespace's in-memory keyword lists and vectors (state.ts), scored above. */
export function lmdbSearch(s: LmdbState): Search {
  const { dbs, keywordCache, vectorCache } = s;
  return {
    async keywordSearch(scope, terms, filter, limit, now = Date.now()) {
      return keywordSearch(dbs, await keywordCache.get(scope.namespace), scope, terms, filter, limit, now);
    },

    async semanticSearch(scope, vector, filter, limit, now = Date.now()) {
      return semanticSearch(dbs, await vectorCache.get(scope.namespace), scope, vector, filter, limit, now);
    },
  };
}
