// Freezing a keyword space to a snapshot, and making one of a snapshot's arrays: what a backend
// persists of it (LMDB: lmdb/keyword-snapshot.ts writes the pieces to a file and maps them back).
import type { DocumentTable } from "./documents";
import { hash, tableSize } from "./ids";
import { List } from "./lists";

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

/**
 * Its live documents and lists as they are now, for a snapshot written over many turns while
 * the space goes on changing (keyword-snapshot.ts): what it writes is fixed here (the
 * documents and list lengths of this moment, gone ones left out and the rest renumbered, lists
 * left empty written without their term), and read later from arrays that only grow at their
 * end or are replaced by copies, except by a compaction, which waits for release().
 */
export function freezeTable(t: DocumentTable): FrozenSpace {
  t.frozen++;
  const n = t.count;
  const { idWords, docLen, docCreated, docEntity, docStart, pool } = t;
  // Gone now (a copy: removals during the save do not change what it writes).
  const gone = t.dead > 0 ? t.gone.slice(0, n) : undefined;
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
  const entityIdOf = new Int32Array(t.entityNames.length).fill(-1);
  const entities: string[] = [];
  for (let d = 0; d < n; d++) {
    if (gone?.[d]) continue;
    const e = docEntity[d];
    if (entityIdOf[e] < 0) entityIdOf[e] = entities.push(t.entityNames[e]) - 1;
  }
  const L = t.listById.length;
  // Each list's parts: doc/tf's postings, then the tail's (both only grow past these counts).
  const lists = t.listById.map((l) => ({
    live: l.live,
    parts: [
      { doc: l.doc, tf: l.tf, n: l.n - l.tailN },
      { doc: l.tailDoc, tf: l.tailTf, n: l.tailN },
    ],
  }));
  const terms: string[] = new Array(L).fill("");
  for (const [term, l] of t.lists) if (l.live > 0) terms[l.id] = term;
  const listN = new Int32Array(L);
  const listMaxLen = new Int32Array(L);
  let postings = 0;
  for (let i = 0; i < L; i++) {
    listN[i] = lists[i].live;
    listMaxLen[i] = t.listById[i].maxLen;
    postings += lists[i].live;
  }
  const otherIds: [number, string][] = [];
  for (const [d, id] of t.otherIds) if (d < n && isLive(d)) otherIds.push([newNumber(d), id]);
  // The id table: as it is (a copy: adds and removes change it in place), or, when documents
  // are renumbered, made for the new numbers while the pieces are written (as rehash makes it).
  const table = gone ? new Int32Array(tableSize(count)) : t.table.slice();
  const otherOf = gone ? new Map(t.otherIds) : undefined;
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
                ? hash(other, undefined)
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
      if (!released) t.frozen--;
      released = true;
    },
  };
}

/** Fills the empty table `s` with the documents and lists of `p` (its arrays are used, not copied: they may be a mapped file's). */
export function thaw(s: DocumentTable, p: SpaceParts) {
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
  for (let d = 0; d < n; d++) {
    s.totalLength += p.docLen[d];
    s.totalSquares += p.docLen[d] * p.docLen[d];
  }
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
}
