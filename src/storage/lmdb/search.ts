// The LMDB search index: BM25 postings and their statistics, vectors and the embedding queue,
// kept in the write transaction of the change they follow (see layout.ts for the keys).

import { keywordSearch } from "../../index/keyword";
import { ann, exactReads, topIndexes, type VectorSpace } from "../../index/vector";
import { byScoreThenNewer, matchesFilter, normalized } from "../ops";
import { isCurrent, type MemoryRecord } from "../records";
import type { MemoryScope, Scored, Search, SearchFilter, VectorUpdate } from "../storage";
import { nextCommitOrder } from "./commit-order";
import { type Dbs, keys } from "./layout";
import type { Writes } from "./staging";
import type { LmdbState } from "./state";
import type { Touched } from "./touched";

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
  /**
   * Its place in commit order: every IndexWriter is made inside an LMDB transaction callback,
   * and LMDB runs those one at a time, in the order they commit (NamespaceCache.refresh).
   */
  readonly order = nextCommitOrder();
  /**
   * The records of the memories this transaction created (new ids), by id; handed to the
   * keyword lists with keywordTouched once committed, if `applied`: its writes were applied
   * (a plan that threw applied none).
   */
  readonly created = new Map<string, MemoryRecord>();
  applied = false;
  /** The vector keys this transaction wrote or removed, for the in-memory vectors (vector-cache.ts). */
  readonly vectorsTouched: [string, string, string][] = [];
  /**
   * What it wrote there, by memory id: the key and its last value (undefined: removed), or null
   * when it wrote more than one key of the memory; handed to the vectors with vectorsTouched once
   * committed, if `applied` (NamespaceCache.refresh).
   */
  readonly vectorsWritten = new Map<string, [Touched, Float32Array | undefined] | null>();
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
    if (v === "pending") {
      this.w.remove(this.dbs.vectors, key);
      this.w.put(this.dbs.embedPending, r.id, null);
      this.wrote(r, undefined);
    } else {
      this.w.remove(this.dbs.embedPending, r.id);
      if (v === undefined) {
        this.w.remove(this.dbs.vectors, key);
        this.wrote(r, undefined);
      } else {
        const n = normalized(v);
        this.w.put(this.dbs.vectors, key, Buffer.from(n.buffer));
        this.wrote(r, n);
      }
    }
  }

  /** Drops a retired memory's vector and queue entry. */
  dropVector(r: MemoryRecord) {
    this.w.remove(this.dbs.vectors, keys.vector(r.namespace, r.entity, r.id));
    this.w.remove(this.dbs.embedPending, r.id);
    this.wrote(r, undefined);
  }

  private wrote(r: MemoryRecord, v: Float32Array | undefined) {
    const key: [string, string, string] = [r.namespace, r.entity, r.id];
    this.vectorsTouched.push(key);
    const had = this.vectorsWritten.get(r.id);
    const same = had === undefined || (had !== null && had[0][0] === key[0] && had[0][1] === key[1]);
    this.vectorsWritten.set(r.id, same ? [key, v] : null);
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
 * `exactOnly` true (bench/vectors.ts' same-run baseline only): the codes' candidates are all
 * scored exactly, each read from LMDB, as before the 4-bit copy.
 */
export const lmdbVectors = { exactOnly: false };

/**
 * Cosine top-k over a scope, on the namespace's in-memory codes and 4-bit copy (src/index/vector/space.ts,
 * four-bit.ts, vector-cache.ts). A scope of at most `ann.rescore` vectors is scored whole,
 * each vector read from LMDB: exact. Beyond, the nearest codes' candidates are ranked by their
 * 4-bit vectors and only the best `exactReads(limit)` are read from LMDB and scored exactly, then
 * more (×4 each time) while fewer than `limit` of them pass: every score answered is the exact
 * cosine. Candidates are checked against their memory record, so a memory that is no longer
 * current is never returned; when too few pass among the candidates, more are asked for, up to
 * the whole scope.
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
  const first = exactReads(limit);
  const seen = new Set<string>(); // scored exactly (approximate path)
  const out: Scored[] = [];
  for (let want = Math.max(first, ann.rescore); ; want *= 4) {
    const { ids, sims, all, byRead } = space.nearest(scope.entity, q, want, lmdbVectors.exactOnly);
    if (byRead) {
      // Exact scores already: only the best few are worth sorting and checking; widen until
      // `limit` pass or all are seen.
      for (let check = limit * 4 + 16; ; check *= 4) {
        const order = topIndexes(sims, check);
        scores.clear();
        for (const j of order) scores.set(ids[j], sims[j]);
        const found = topAccepted(scores, accept, limit);
        if (found.length >= limit) return found;
        if (order.length >= sims.length) {
          if (all) return found;
          break;
        }
      }
      continue;
    }
    // Ranked by the 4-bit copy: the best `first` read exactly, then 4× more, until `limit` pass.
    const order = Array.from(ids.keys()).sort((a, b) => sims[b] - sims[a]);
    for (let from = 0, to = first; from < order.length; from = to, to *= 4) {
      const batch: string[] = [];
      const records: MemoryRecord[] = [];
      for (const i of order.slice(from, to)) {
        const id = ids[i];
        if (seen.has(id)) continue;
        seen.add(id);
        const m = accept(id);
        if (!m) continue;
        batch.push(id);
        records.push(m);
      }
      const exact = space.score(batch, q);
      for (let i = 0; i < batch.length; i++)
        if (!Number.isNaN(exact[i])) out.push({ memory: records[i], score: exact[i] });
      if (out.length >= limit) return out.sort(byScoreThenNewer).slice(0, limit);
    }
    if (all) return out.sort(byScoreThenNewer).slice(0, limit);
  }
}

/** The Search role: each namespace's in-memory keyword lists and vectors (state.ts), scored above. */
export function lmdbSearch(s: LmdbState): Search {
  const { dbs, keywordCache, vectorCache } = s;
  return {
    async keywordSearch(scope, terms, filter, limit, now = Date.now(), share = 0) {
      const space = await keywordCache.get(scope.namespace);
      return keywordSearch(
        space,
        scope,
        terms,
        limit,
        (id) => {
          const m = dbs.memories.get(id) as MemoryRecord | undefined;
          return isCurrent(m, now) && m.namespace === scope.namespace && matchesFilter(m, filter) ? m : null;
        },
        share,
      );
    },

    async semanticSearch(scope, vector, filter, limit, now = Date.now()) {
      return semanticSearch(dbs, await vectorCache.get(scope.namespace), scope, vector, filter, limit, now);
    },
  };
}
