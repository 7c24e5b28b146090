// The inverted index of a namespace, in memory: per term a list of (document, tf) in typed
// arrays, so a namespace-wide keyword search over common words scores hundreds of thousands of
// postings in a few milliseconds. LMDB holds what it is built from: the namespace's current
// memories (namespace_memories, written in the apply transaction) and their records, whose
// content is tokenized here (format 6; format 5 stored the terms, at 3-5 µs of a raw store's
// CPU, for namespaces never searched too). It is built on the namespace's first search (in
// slices: touched.ts) and kept in step by the storage after each committed write that changed it
// (it re-reads those memories from LMDB and indexes what is current, so it follows the committed
// state whatever order commits land in).
// Document counts and lengths are summed here. Every candidate is checked against its memory
// record, so a memory that is no longer current is never returned.
// Nothing here is an object per document or per posting (issue 26: 1,000,000 memories took
// 991 MB of heap as JS objects): a document's id is 16 bytes (a UUID; any other id is kept
// aside), found again through an open-addressing table; postings are 6 bytes (document, tf);
// an entity's documents are one growing array.
import { termCounts } from "../../text/tokens";
import { lowerUuidPattern } from "../../wire/schemas";
import type { EventRecord, MemoryRecord } from "../records";
import { dropSnapshots, readSnapshot, type SpaceParts, writeSnapshot } from "./keyword-snapshot";
import { type Dbs, END } from "./layout";
import { loadSlice, NamespaceCache } from "./touched";

type Typed = Int32Array | Uint16Array | Uint8Array | Float64Array;
const grown = <T extends Typed>(a: T, size: number): T => {
  if (size <= a.length) return a;
  const b = new (a.constructor as new (n: number) => T)(Math.max(size, a.length * 2));
  b.set(a);
  return b;
};
/** A copy of the first n items, without spare room. */
const trimmed = <T extends Typed>(a: T, n: number): T => {
  const b = new (a.constructor as new (n: number) => T)(n);
  b.set(a.subarray(0, n));
  return b;
};

/** Most a tf can be (more occurrences count as this many: BM25 saturates long before). */
const MAX_TF = 65535;

/**
 * One term's postings, in insertion order; `live` counts those of documents not gone (its df).
 * (The document's length is read from the document: keeping it in each posting too measured no
 * faster, and took 2 more bytes a posting.)
 */
export class List {
  n = 0;
  live = 0;
  doc = new Int32Array(2);
  tf = new Uint16Array(2);
  /** The longest document ever pushed. */
  maxLen = 0;
  constructor(readonly id: number) {}
  push(d: number, tf: number, len: number) {
    if (this.n === this.doc.length) {
      this.doc = grown(this.doc, this.n + 1);
      this.tf = grown(this.tf, this.n + 1);
    }
    if (len > this.maxLen) this.maxLen = len;
    this.doc[this.n] = d;
    this.tf[this.n] = tf;
    this.n++;
    this.live++;
  }
  /** Drops spare room (after a first load, when most lists stop growing). */
  trim() {
    this.doc = trimmed(this.doc, this.n);
    this.tf = trimmed(this.tf, this.n);
  }
}

const UUID = new RegExp(lowerUuidPattern);
const hex8 = (n: number) => (n >>> 0).toString(16).padStart(8, "0");

/**
 * A namespace's postings. Document numbers are this process's own; a changed memory gets a new
 * one. Per document: its (list id, tf) pairs in one shared pool.
 */
export class KeywordSpace {
  /** Documents numbered so far (gone ones included). */
  count = 0;
  /** Document number -> its id: 4 words of a UUID, or (any other id) zeros and an entry in `otherIds`. */
  private idWords = new Int32Array(4096);
  private readonly otherIds = new Map<number, string>();
  /** Open addressing (linear probing) over the live documents' ids: document + 1, 0 when empty. */
  private table = new Int32Array(2048);
  /** Document number -> 1 once the document is gone. */
  gone = new Uint8Array(1024);
  /** Document number -> its length, creation time, entity, and where its pairs start in the pool. */
  docLen = new Int32Array(1024);
  docCreated = new Float64Array(1024);
  private docEntity = new Int32Array(1024);
  docStart = new Int32Array(1025);
  /** (list id, tf) pairs of every document, in document order. */
  poolList = new Int32Array(8192);
  poolTf = new Uint16Array(8192);
  /** Entities: names, and per entity its documents (gone ones included until compaction) and how many are live. */
  private readonly entityNames: string[] = [];
  private readonly entityIndex = new Map<string, number>();
  private entityDocs: Int32Array[] = [];
  private entityCount: number[] = [];
  private entityLive: number[] = [];
  /** Live documents and the sum of their lengths. */
  private live = 0;
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
    return { docs: this.live, totalLength: this.totalLength };
  }

  /** A document's memory id ("" once gone). */
  idOf(d: number): string {
    if (this.gone[d]) return "";
    const other = this.otherIds.get(d);
    if (other !== undefined) return other;
    const w = this.idWords;
    const a = hex8(w[d * 4]);
    const b = hex8(w[d * 4 + 1]);
    const c = hex8(w[d * 4 + 2]);
    const e = hex8(w[d * 4 + 3]);
    return `${a}-${b.slice(0, 4)}-${b.slice(4)}-${c.slice(0, 4)}-${c.slice(4)}${e}`;
  }

  /** Whether document a's id sorts after document b's (as strings). */
  idAfter(a: number, b: number): boolean {
    if (this.otherIds.has(a) || this.otherIds.has(b)) return this.idOf(a) > this.idOf(b);
    const w = this.idWords;
    for (let i = 0; i < 4; i++) {
      const x = w[a * 4 + i] >>> 0;
      const y = w[b * 4 + i] >>> 0;
      if (x !== y) return x > y;
    }
    return false;
  }

  /** An id's 4 words (a UUID's), or undefined for any other id. */
  private static words(id: string): [number, number, number, number] | undefined {
    if (id.length !== 36 || !UUID.test(id)) return undefined;
    return [
      Number.parseInt(id.slice(0, 8), 16) | 0,
      Number.parseInt(id.slice(9, 13) + id.slice(14, 18), 16) | 0,
      Number.parseInt(id.slice(19, 23) + id.slice(24, 28), 16) | 0,
      Number.parseInt(id.slice(28, 36), 16) | 0,
    ];
  }

  private static hash(id: string, w: [number, number, number, number] | undefined): number {
    if (w) return Math.imul(w[3] ^ Math.imul(w[2], 0x9e3779b1) ^ w[0], 0x85ebca6b);
    let h = 0x811c9dc5;
    for (let i = 0; i < id.length; i++) h = Math.imul(h ^ id.charCodeAt(i), 16777619);
    return h;
  }

  private same(d: number, id: string, w: [number, number, number, number] | undefined): boolean {
    if (!w) return this.otherIds.get(d) === id;
    const x = this.idWords;
    return (
      x[d * 4] === w[0] &&
      x[d * 4 + 1] === w[1] &&
      x[d * 4 + 2] === w[2] &&
      x[d * 4 + 3] === w[3] &&
      !this.otherIds.has(d)
    );
  }

  /** The table slot holding id, or the empty slot where it would go. */
  private slot(id: string, w: [number, number, number, number] | undefined): number {
    const mask = this.table.length - 1;
    for (let s = KeywordSpace.hash(id, w) & mask; ; s = (s + 1) & mask) {
      const v = this.table[s];
      if (v === 0 || this.same(v - 1, id, w)) return s;
    }
  }

  /** The live document of a memory id, if any. */
  docOf(id: string): number | undefined {
    const v = this.table[this.slot(id, KeywordSpace.words(id))];
    return v === 0 ? undefined : v - 1;
  }

  /** The table hash of document d's id (as hash() of it). */
  private hashOf(d: number): number {
    if (this.otherIds.size > 0) {
      const other = this.otherIds.get(d);
      if (other !== undefined) return KeywordSpace.hash(other, undefined);
    }
    const x = this.idWords;
    return Math.imul(x[d * 4 + 3] ^ Math.imul(x[d * 4 + 2], 0x9e3779b1) ^ x[d * 4], 0x85ebca6b);
  }

  /** Rebuilds the table for the live documents, at most half full. */
  private rehash(size: number) {
    let n = 2048;
    while (n < size * 2) n *= 2;
    this.table = new Int32Array(n);
    const mask = n - 1;
    for (let d = 0; d < this.count; d++) {
      if (this.gone[d]) continue;
      let s = this.hashOf(d) & mask;
      while (this.table[s] !== 0) s = (s + 1) & mask;
      this.table[s] = d + 1;
    }
  }

  /** Removes the entry of slot s, shifting later entries of its run back (no tombstones). */
  private unslot(s: number) {
    const t = this.table;
    const mask = t.length - 1;
    t[s] = 0;
    for (let j = (s + 1) & mask; t[j] !== 0; j = (j + 1) & mask) {
      const home = this.hashOf(t[j] - 1) & mask;
      // Move it back into s when s lies cyclically between its home and j.
      if ((j > s && (home <= s || home > j)) || (j < s && home <= s && home > j)) {
        t[s] = t[j];
        t[j] = 0;
        s = j;
      }
    }
  }

  /** The live documents of an entity (none: undefined). */
  entityDocuments(entity: string): { docs: Int32Array; live: number } | undefined {
    const e = this.entityIndex.get(entity);
    if (e === undefined || this.entityLive[e] === 0) return undefined;
    return { docs: this.entityDocs[e].subarray(0, this.entityCount[e]), live: this.entityLive[e] };
  }

  /** Adds a memory from its terms (DocTerms: [length, createdAt, entity, term, tf, ...]). */
  add(id: string, v: DocTerms, isNew = false) {
    if (!isNew) this.remove(id);
    const entity = v[2] as string;
    const d = this.count++;
    const length = v[0] as number;
    // (Each array by its own length: they need not have grown in step, after a snapshot was read.)
    this.gone = grown(this.gone, d + 1);
    this.docLen = grown(this.docLen, d + 1);
    this.docCreated = grown(this.docCreated, d + 1);
    this.docEntity = grown(this.docEntity, d + 1);
    this.docStart = grown(this.docStart, d + 2);
    this.idWords = grown(this.idWords, (d + 1) * 4);
    const w = KeywordSpace.words(id);
    if (w) this.idWords.set(w, d * 4);
    else {
      this.idWords.fill(0, d * 4, d * 4 + 4);
      this.otherIds.set(d, id);
    }
    this.gone[d] = 0;
    if ((this.live + 1) * 2 > this.table.length) this.rehash(this.live + 1);
    this.table[this.slot(id, w)] = d + 1;
    this.live++;
    const start = this.docStart[d];
    const end = start + (v.length - 3) / 2;
    this.poolList = grown(this.poolList, end);
    this.poolTf = grown(this.poolTf, end);
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
      const tf = Math.min(MAX_TF, v[i + 1] as number);
      l.push(d, tf, length);
      this.poolList[k] = l.id;
      this.poolTf[k++] = tf;
    }
    this.docStart[d + 1] = end;
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

  remove(id: string) {
    const w = KeywordSpace.words(id);
    const s = this.slot(id, w);
    if (this.table[s] === 0) return;
    const d = this.table[s] - 1;
    this.unslot(s);
    this.otherIds.delete(d);
    this.live--;
    this.gone[d] = 1;
    this.totalLength -= this.docLen[d];
    for (let k = this.docStart[d]; k < this.docStart[d + 1]; k++) this.listById[this.poolList[k]].live--;
    this.entityLive[this.docEntity[d]]--;
    if (++this.dead > this.compactAfter && this.dead > this.live) this.compact();
  }

  /** Its live documents and their lists (gone ones compacted away first: nothing of them is kept). */
  toParts(): SpaceParts {
    if (this.dead > 0) this.compact();
    const n = this.count;
    const listIdOf = new Int32Array(this.listById.length).fill(-1);
    const terms: string[] = [];
    const kept: List[] = [];
    let postings = 0;
    for (const [term, l] of this.lists) {
      if (l.n === 0) continue;
      listIdOf[l.id] = kept.length;
      kept.push(l);
      terms.push(term);
      postings += l.n;
    }
    // The lists' arrays are handed over as they are (no copy: a snapshot writes them one by one).
    const listN = new Int32Array(kept.length);
    const listMaxLen = new Int32Array(kept.length);
    const listDoc: Int32Array<ArrayBuffer>[] = [];
    const listTf: Uint16Array<ArrayBuffer>[] = [];
    kept.forEach((l, i) => {
      listN[i] = l.n;
      listMaxLen[i] = l.maxLen;
      listDoc.push(l.doc.subarray(0, l.n));
      listTf.push(l.tf.subarray(0, l.n));
    });
    const poolSize = this.docStart[n];
    // Renumbered lists only if some were dropped (else the pool is handed over as it is).
    const same = kept.length === this.listById.length && kept.every((l, i) => l.id === i);
    let poolList = this.poolList.subarray(0, poolSize);
    if (!same) {
      poolList = new Int32Array(poolSize);
      for (let k = 0; k < poolSize; k++) poolList[k] = listIdOf[this.poolList[k]];
    }
    // Entities with a live document only, renumbered.
    const entityIdOf = new Int32Array(this.entityNames.length).fill(-1);
    const entities: string[] = [];
    const docEntity = new Int32Array(n);
    for (let d = 0; d < n; d++) {
      const e = this.docEntity[d];
      if (entityIdOf[e] < 0) entityIdOf[e] = entities.push(this.entityNames[e]) - 1;
      docEntity[d] = entityIdOf[e];
    }
    return {
      count: n,
      idWords: this.idWords.subarray(0, n * 4),
      docLen: this.docLen.subarray(0, n),
      docCreated: this.docCreated.subarray(0, n),
      docEntity,
      docStart: this.docStart.subarray(0, n + 1),
      poolList,
      poolTf: this.poolTf.subarray(0, poolSize),
      listN,
      listMaxLen,
      listDoc,
      listTf,
      postings,
      table: this.table,
      terms,
      entities,
      otherIds: [...this.otherIds],
    };
  }

  /** A space of the live documents and lists of `p` (its arrays are used, not copied). */
  static fromParts(p: SpaceParts, compactAfter?: number): KeywordSpace {
    const s = new KeywordSpace(compactAfter);
    const n = p.count;
    s.count = n;
    s.idWords = p.idWords;
    s.docLen = p.docLen;
    s.docCreated = p.docCreated;
    s.docEntity = p.docEntity;
    s.docStart = p.docStart;
    s.poolList = p.poolList;
    s.poolTf = p.poolTf;
    s.gone = new Uint8Array(n + 1);
    for (const [d, id] of p.otherIds) s.otherIds.set(d, id);
    s.live = n;
    for (let d = 0; d < n; d++) s.totalLength += p.docLen[d];
    p.terms.forEach((term, i) => {
      const l = new List(i);
      const len = p.listN[i];
      l.n = len;
      l.live = len;
      l.maxLen = p.listMaxLen[i];
      l.doc = p.listDoc[i];
      l.tf = p.listTf[i];
      s.listById.push(l);
      s.lists.set(term, l);
    });
    p.entities.forEach((name, e) => {
      s.entityNames.push(name);
      s.entityIndex.set(name, e);
      s.entityCount.push(0);
      s.entityLive.push(0);
    });
    for (let d = 0; d < n; d++) s.entityCount[p.docEntity[d]]++;
    s.entityDocs = s.entityCount.map((c) => new Int32Array(c));
    s.entityCount.fill(0);
    for (let d = 0; d < n; d++) {
      const e = p.docEntity[d];
      s.entityDocs[e][s.entityCount[e]++] = d;
    }
    for (let e = 0; e < s.entityLive.length; e++) s.entityLive[e] = s.entityCount[e];
    s.table = p.table;
    return s;
  }

  /** Drops spare room in every array (after a first load). */
  trim() {
    for (const l of this.listById) l.trim();
    const n = this.count;
    this.poolList = trimmed(this.poolList, this.docStart[n]);
    this.poolTf = trimmed(this.poolTf, this.docStart[n]);
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
      poolList: this.poolList,
      poolTf: this.poolTf,
      gone: this.gone,
      otherIds: new Map(this.otherIds),
    };
    this.idWords = new Int32Array(old.idWords.length);
    this.docLen = new Int32Array(old.docLen.length);
    this.docCreated = new Float64Array(old.docCreated.length);
    this.docEntity = new Int32Array(old.docEntity.length);
    this.docStart = new Int32Array(old.docStart.length);
    this.poolList = new Int32Array(old.poolList.length);
    this.poolTf = new Uint16Array(old.poolTf.length);
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
      this.poolList.set(old.poolList.subarray(from, to), this.docStart[e]);
      this.poolTf.set(old.poolTf.subarray(from, to), this.docStart[e]);
      this.docStart[e + 1] = this.docStart[e] + (to - from);
      e++;
    }
    this.count = e;
    for (const [term, l] of this.lists) {
      let k = 0;
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

/** How many namespaces' lists were read from a snapshot in this process (for tests). */
export const snapshotStats = { restored: 0 };

/** When a namespace's lists are saved again: after this many changes (and a tenth of its size) since the last save. */
export const snapshotting = { after: 10_000 };

/**
 * The keyword lists of every namespace searched so far. With `dataDir`, each is saved in a
 * snapshot beside the store (keyword-snapshot.ts) and read back, caught up, on its first search.
 */
export function keywordCache(
  dbs: Dbs,
  dataDir?: string,
  settledSeq: () => number = () => Number.POSITIVE_INFINITY,
): KeywordCache & { save(): void; forget(ns: string): void } {
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
  const stamp = () => ({
    format: (dbs.meta.get("format") as number | undefined) ?? 0,
    clockEpoch: (dbs.meta.get("clockEpoch") as number | undefined) ?? 0,
    searchEpoch: (dbs.meta.get("searchEpoch") as number | undefined) ?? 0,
  });
  /**
   * The time of the namespace's newest event whose seq is at most `seq` (0 if none). Per
   * namespace, times and seqs grow together (both are handed out in commit order), so every
   * event of a later seq is at that time or after.
   */
  const settledAt = (ns: string, seq: number) => {
    for (const key of dbs.eventsByNs.getKeys({ start: [ns, END], end: [ns], reverse: true }))
      if ((key as [string, number, number])[2] <= seq) return (key as [string, number, number])[1];
    return 0;
  };
  /** Per loaded space: its namespace, changes since its last save, and (restored) the time to catch up from. */
  const state = new Map<KeywordSpace, { ns: string; changes: number; from?: number }>();
  const save = (s: KeywordSpace) => {
    const st = state.get(s);
    if (!dataDir || !st || s.stats.docs === 0) return;
    // Read in the same turn as the lists: every event up to the settled seq is committed and
    // followed by them; the load catches up from its time on.
    const atMs = settledAt(st.ns, settledSeq());
    try {
      writeSnapshot(dataDir, st.ns, { ...stamp(), atMs }, s.toParts());
    } catch {
      // A snapshot is an optimisation: without one the next start rebuilds the lists.
    } finally {
      st.changes = 0;
    }
  };
  const changed = (s: KeywordSpace) => {
    const st = state.get(s);
    if (!st) return;
    if (++st.changes >= Math.max(snapshotting.after, s.stats.docs / 10) && dataDir) {
      st.changes = -Infinity; // one save queued
      setTimeout(() => {
        if (state.has(s)) save(s);
      }, 0).unref?.();
    }
  };
  const cache = new NamespaceCache<KeywordSpace, DocTerms>({
    empty: (ns) => {
      const found = dataDir ? readSnapshot(dataDir, ns, stamp()) : undefined;
      if (found) snapshotStats.restored++;
      const s = found ? KeywordSpace.fromParts(found.parts) : new KeywordSpace();
      state.set(s, { ns, changes: 0, from: found?.atMs });
      return s;
    },
    load: (s, ns, after, limit) => {
      const st = state.get(s)!;
      if (st.from !== undefined) {
        // Restored: re-read every memory the namespace's events name since the snapshot.
        const ids = new Set<string>();
        for (const key of dbs.eventsByNs.getKeys({ start: [ns, st.from], end: [ns, END] })) {
          const e = dbs.events.get((key as unknown[])[2] as number) as EventRecord | undefined;
          if (!e) continue;
          ids.add(e.memoryId);
          if (e.mergedFromId) ids.add(e.mergedFromId);
        }
        for (const id of ids) {
          const terms = termsOf(ns, id);
          if (terms) s.add(id, terms);
          else s.remove(id);
        }
        st.changes = ids.size;
        return undefined;
      }
      return loadSlice(dbs.namespaceMemories, ns, after, limit, (key) => {
        const terms = termsOf(ns, key[1] as string);
        if (terms) s.add(key[1] as string, terms, true);
      });
    },
    loaded: (s) => {
      const st = state.get(s);
      if (st?.from === undefined) {
        s.trim();
        // Built from the records: saved behind this search, so the next start reads it.
        if (st) {
          st.changes = -Infinity;
          setTimeout(() => save(s), 0).unref?.();
        }
      } else st.from = undefined;
    },
    keep: (s) => {
      const keep = s.stats.docs > 0;
      if (!keep) state.delete(s);
      return keep;
    },
    read: ([ns, , id]) => termsOf(ns, id),
    drop: (s, [, , id]) => {
      s.remove(id);
      changed(s);
    },
    put: (s, [, , id], terms) => {
      s.add(id, terms);
      changed(s);
    },
  });
  const clear = cache.clear.bind(cache);
  return Object.assign(cache, {
    clear() {
      state.clear();
      clear();
    },
    /** Saves every loaded namespace changed since its last save (at close). */
    save() {
      for (const [s, st] of state) if (st.changes !== 0 && st.from === undefined) save(s);
    },
    /** Deletes a namespace's snapshot (after an erasure in it); its lists are saved again later. */
    forget(ns: string) {
      if (dataDir) dropSnapshots(dataDir, ns);
      for (const st of state.values()) if (st.ns === ns) st.changes = Math.max(st.changes, 1);
    },
  });
}
