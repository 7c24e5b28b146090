// BM25 top-k over a keyword space's scope: the namespace (walk.ts: MaxScore over the query's
// lists) or an entity's documents (each looked at once, here). The search checks every candidate
// through the caller's `accept`, so what it returns is whatever the caller's store holds as
// current and matching: the engine knows documents and scores, the caller its records.
import { bm25n, idf, type LengthNorm, lengthNormB, type QueryTerm as Term } from "../../text/scoring";
import type { List } from "./lists";
import type { KeywordSpace } from "./space";
import { type Accept, type Hit, namespaceTop, type QueryTerm } from "./walk";

const EMPTY: Hit<never>[] = [];

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
export function keywordSearch<R extends object, S extends object>(
  of: KeywordSpace,
  scope: S & { readonly entity?: string },
  terms: readonly Term[],
  limit: number,
  acceptId: Accept<R>,
  /**
   * The share of an adjacent hit's score a hit gains (text/scoring.ts NEIGHBOUR_SHARE; search
   * passes it): 0, BM25's own scores.
   */
  share = 0,
): Hit<R>[] {
  if (terms.length === 0) return EMPTY;
  const space = of.expanded(of.packed ? new Set(terms.map((t) => t.term)) : undefined);
  // The scope's documents and their average length (BM25's N and avgdl).
  const ofEntity = scope.entity === undefined ? undefined : space.entityDocuments(scope.entity);
  const docsOf = ofEntity?.docs;
  let { docs, totalLength } = space.stats;
  let totalSquares = space.totalSquares;
  if (scope.entity !== undefined) {
    docs = ofEntity?.live ?? 0;
    totalLength = 0;
    totalSquares = 0;
    if (docsOf)
      for (const d of docsOf)
        if (!space.gone[d]) {
          totalLength += space.docLen[d];
          totalSquares += space.docLen[d] * space.docLen[d];
        }
  }
  if (docs === 0) return EMPTY;
  // BM25's avgdl, and b from the spread of the scope's lengths (text/scoring.ts lengthNormB).
  const avg: LengthNorm = { avg: totalLength / docs, b: lengthNormB(docs, totalLength, totalSquares) };
  const accepted = new Map<string, R | null>();
  const accept: Accept<R> = (id) => {
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
  // Adjacent hits need an entity's order: over a namespace, BM25 alone.
  if (!docsOf) return namespaceTop(space, ts, avg, limit, accept);
  if (space.touched.length < docsOf.length) {
    const room = Math.max(1024, docsOf.length + (docsOf.length >> 3));
    space.touched = new Int32Array(room);
    space.values = new Float64Array(room);
  }
  return pickAccepted(space, entityCandidates(space, docsOf, ts, docs, avg, share), limit, accept);
}

/**
 * An entity's candidates into (space.touched, space.values): its documents, each looked at once
 * for which of the query's lists hold it. Returns how many.
 */
function entityCandidates(
  space: KeywordSpace,
  docsOf: Int32Array,
  ts: QueryTerm[],
  docs: number,
  avg: LengthNorm,
  share: number,
) {
  const { touched, values } = space;
  const listIds = ts.map((t) => t.list.id);
  const hits: number[] = []; // document, its position among the entity's live ones, then (list index, tf) pairs, then -1
  const df = ts.map(() => 0);
  const positions = new Int32Array(docsOf.length);
  let at = -1;
  for (const d of share > 0 ? liveInIdOrder(space, docsOf) : docsOf) {
    if (space.gone[d]) continue;
    at++;
    let found = false;
    const n = space.listsOf(d);
    for (let k = 0; k < n; k++) {
      const q = listIds.indexOf(space.termIds[k]);
      if (q < 0) continue;
      if (!found) hits.push(d, at);
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
    const at = hits[i++];
    parts.fill(0);
    for (; hits[i] !== -1; i += 2) parts[hits[i]] = bm25n(w[hits[i]], hits[i + 1], space.docLen[d], avg);
    i++;
    let sum = 0;
    for (const p of parts) sum += p;
    touched[count] = d;
    positions[count] = at;
    values[count++] = sum;
  }
  // The better of the adjacent hits (the entity's live documents just before and after, when they
  // are candidates too) lends a share of its score.
  if (share > 0) {
    const own = values.slice(0, count);
    for (let c = 0; c < count; c++) {
      const before = c > 0 && positions[c - 1] === positions[c] - 1 ? own[c - 1] : 0;
      const after = c + 1 < count && positions[c + 1] === positions[c] + 1 ? own[c + 1] : 0;
      values[c] += share * Math.max(before, after);
    }
  }
  return count;
}

/**
 * An entity's live documents in the order of their ids (UUIDv7: the order they were stored in),
 * which is how adjacent hits are told on either backend (PostgreSQL's SQL statement orders by
 * id): documents are numbered in the order they were added, and a changed memory gets a new
 * number, so after an edit that order is not the ids' (nor the same after a restart).
 */
function liveInIdOrder(space: KeywordSpace, docsOf: Int32Array): Int32Array {
  const live = new Int32Array(docsOf.length);
  let n = 0;
  let sorted = true;
  for (const d of docsOf) {
    if (space.gone[d]) continue;
    if (n > 0 && sorted && space.idAfter(live[n - 1], d)) sorted = false;
    live[n++] = d;
  }
  const out = live.subarray(0, n);
  return sorted ? out : out.sort((a, b) => (space.idAfter(a, b) ? 1 : -1));
}

/**
 * The best `limit` accepted of a search's candidates (space.touched, space.values)[0, count):
 * score high to low, then newer first (createdAt, then id), as byScoreThenNewer orders them, so
 * a tie among many needs no record reads beyond the ones returned.
 */
function pickAccepted<R>(space: KeywordSpace, count: number, limit: number, accept: Accept<R>): Hit<R>[] {
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
    const out: Hit<R>[] = [];
    for (const j of heap) {
      const m = accept(space.idOf(touched[j]));
      if (m) out.push({ memory: m, score: values[j] });
      if (out.length === limit) return out;
    }
    if (heap.length >= count) return out;
  }
}
