// A namespace's in-memory keyword lists (keyword-cache.ts) saved in a file beside the store, so
// that the first search after a start reads them (a fraction of a second at 1,000,000 memories)
// instead of tokenizing every memory again (~15 s). A snapshot is written behind the store path:
// after a namespace's lists are first built, when enough has changed since the last one, and at
// close; never in a write transaction. It is exact once caught up: it records the time of the
// namespace's newest event that the lists had followed when it was taken (as of the last seq
// handed out before the oldest write still in flight: index.ts), and the load re-reads every
// memory named by the namespace's events from that time on (a re-read is idempotent: it indexes
// what is current), so a snapshot older than the store (a kill -9 after it) misses nothing.
// A snapshot of another build is not used (terms depend on the tokenizer). Changes that write no
// events of their own time are refused by epoch: the snapshot records the
// data dir's format, meta "clockEpoch" (bumped by `memd import`, whose events keep their old
// times) and "searchEpoch" (bumped by a rebuild of the search index); a snapshot whose epochs
// differ is ignored. A torn or damaged file fails a section's hash and is ignored too.
// Erasures: an erasure deletes its namespace's snapshot (a later one holds only what is current);
// `memd compact` deletes every snapshot (compact.ts), so no file keeps an erased memory's words.
import {
  closeSync,
  fstatSync,
  fsyncSync,
  mkdirSync,
  openSync,
  readdirSync,
  readSync,
  renameSync,
  rmSync,
  writeSync,
} from "node:fs";
import { join } from "node:path";
import { commit, version } from "../../build-info";
import { termCounts } from "../../text/tokens";
import type { SpaceParts } from "../keyword-space";

const MAGIC = "memd-keywords-3";

/** The snapshots' directory in a data dir. */
export const snapshotDir = (dataDir: string) => join(dataDir, "search");
const fileOf = (dataDir: string, namespace: string) =>
  join(snapshotDir(dataDir), `keywords-${Bun.hash(namespace).toString(16)}.bin`);

/**
 * Which build wrote it: the terms of a text depend on the tokenizer, stemmers and stop words of
 * the release (a snapshot of another build is not used), and from source on a sample's terms.
 */
let buildStamp: string | undefined;
const build = () => (buildStamp ??= `${version}+${commit}:${Bun.hash(JSON.stringify(sampleTerms())).toString(16)}`);

/** A sample text's terms as keyword-cache.ts packs them (packTerms(sample, 0, "")). */
function sampleTerms(): (string | number)[] {
  const sample =
    "The runners were running to the cafés of Straße Lisbon, 北京烤鸭 and ümlauts; les enfants mangeaient des pommes 2024";
  const { tf, length } = termCounts(sample);
  const v: (string | number)[] = [length, 0, ""];
  for (const [term, n] of tf) v.push(term, n);
  return v;
}

/** Which state of the store a snapshot belongs to. */
export type SnapshotStamp = { format: number; clockEpoch: number; searchEpoch: number; atMs: number };

type Header = {
  magic: string;
  build: string;
  namespace: string;
  stamp: SnapshotStamp;
  count: number;
  pool: number;
  postings: number;
  terms: string[];
  entities: string[];
  otherIds: [number, string][];
  table: number;
  /** Bun.hash of each section, in order. */
  hashes: string[];
};

const align8 = (n: number) => Math.ceil(n / 8) * 8;
type Section = Int32Array<ArrayBuffer> | Uint16Array<ArrayBuffer> | Float64Array<ArrayBuffer>;

/**
 * The sections of a snapshot, in order; the lists' documents and tfs are one section each,
 * written list after list (a section's hash is chained over its chunks, Bun.hash's seed).
 */
const sectionsOf = (p: SpaceParts): Section[][] => [
  [p.idWords],
  [p.docLen],
  [p.docCreated],
  [p.docEntity],
  [p.docStart],
  [p.poolList],
  [p.poolTf],
  [p.listN],
  [p.listMaxLen],
  p.listDoc,
  p.listTf,
  [p.table],
];
const bytesOf = (x: Section) => new Uint8Array(x.buffer, x.byteOffset, x.byteLength);
const hashOf = (chunks: Section[]) => {
  let h: number | bigint = 0;
  for (const c of chunks) h = Bun.hash(bytesOf(c), h);
  return h.toString(16);
};

/** Data dirs whose leftover temporary files this process removed. */
const swept = new Set<string>();

/** Writes a snapshot (through a temporary file, fsynced, then renamed over the last one). */
export function writeSnapshot(dataDir: string, namespace: string, stamp: SnapshotStamp, p: SpaceParts) {
  const sections = sectionsOf(p);
  const header: Header = {
    magic: MAGIC,
    build: build(),
    namespace,
    stamp,
    count: p.count,
    pool: p.poolList.length,
    postings: p.postings,
    table: p.table.length,
    terms: p.terms,
    entities: p.entities,
    otherIds: p.otherIds,
    hashes: sections.map(hashOf),
  };
  const head = Buffer.from(JSON.stringify(header));
  const prefix = new Uint8Array(align8(8 + head.length));
  new DataView(prefix.buffer).setUint32(0, head.length, true);
  prefix.set(head, 8);
  mkdirSync(snapshotDir(dataDir), { recursive: true });
  // A write cut short by a crash left its temporary file: the first save of a process removes them.
  if (!swept.has(dataDir)) {
    swept.add(dataDir);
    for (const f of readdirSync(snapshotDir(dataDir)))
      if (f.endsWith(".tmp")) rmSync(join(snapshotDir(dataDir), f), { force: true });
  }
  const file = fileOf(dataDir, namespace);
  const tmp = `${file}.${process.pid}.tmp`;
  const fd = openSync(tmp, "w");
  const pad = new Uint8Array(8);
  try {
    writeSync(fd, prefix);
    // Each section as it is in memory (no copy of the whole), padded to 8 bytes.
    for (const chunks of sections) {
      let size = 0;
      for (const c of chunks) {
        writeSync(fd, bytesOf(c));
        size += c.byteLength;
      }
      if (size % 8) writeSync(fd, pad, 0, 8 - (size % 8));
    }
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(tmp, file);
}

/** The parts of a namespace's snapshot (KeywordSpace.fromParts), if there is one of this stamp (atMs aside), whole. */
export function readSnapshot(
  dataDir: string,
  namespace: string,
  stamp: Omit<SnapshotStamp, "atMs">,
): { parts: SpaceParts; atMs: number } | undefined {
  // Read into an array of exactly the file's size (readFileSync may keep more room than it filled).
  let buf: Uint8Array<ArrayBuffer>;
  try {
    const fd = openSync(fileOf(dataDir, namespace), "r");
    try {
      buf = new Uint8Array(fstatSync(fd).size);
      for (let at = 0; at < buf.length; ) {
        const n = readSync(fd, buf, at, buf.length - at, at);
        if (n <= 0) return undefined;
        at += n;
      }
    } finally {
      closeSync(fd);
    }
  } catch {
    return undefined;
  }
  try {
    // The arrays view the file's bytes (a fresh buffer: 8-byte aligned).
    const bytes = buf;
    const length = new DataView(bytes.buffer).getUint32(0, true);
    const header = JSON.parse(Buffer.from(bytes.subarray(8, 8 + length)).toString()) as Header;
    const s = header.stamp;
    if (
      header.magic !== MAGIC ||
      header.build !== build() ||
      header.namespace !== namespace ||
      s.format !== stamp.format ||
      s.clockEpoch !== stamp.clockEpoch ||
      s.searchEpoch !== stamp.searchEpoch
    )
      return undefined;
    let at = align8(8 + length);
    const L = header.terms.length;
    const n = header.count;
    const sizes: [new (b: ArrayBuffer, o: number, l: number) => Section, number][] = [
      [Int32Array, n * 4],
      [Int32Array, n],
      [Float64Array, n],
      [Int32Array, n],
      [Int32Array, n + 1],
      [Int32Array, header.pool],
      [Uint16Array, header.pool],
      [Int32Array, L],
      [Int32Array, L],
      [Int32Array, header.postings],
      [Uint16Array, header.postings],
      [Int32Array, header.table],
    ];
    const out: Section[] = [];
    for (const [T, count] of sizes) {
      const bytesPer = (T as unknown as { BYTES_PER_ELEMENT: number }).BYTES_PER_ELEMENT;
      if (at + count * bytesPer > buf.length) return undefined;
      out.push(new T(bytes.buffer, bytes.byteOffset + at, count));
      at += align8(count * bytesPer);
    }
    if (at !== buf.length) return undefined;
    const [idWords, docLen, docCreated, docEntity, docStart, poolList, poolTf, lengths, listMaxLen, docs, tfs, table] =
      out;
    // The lists, each a view of its part of the two list sections.
    const listN = lengths as Int32Array<ArrayBuffer>;
    const listDoc: Int32Array<ArrayBuffer>[] = [];
    const listTf: Uint16Array<ArrayBuffer>[] = [];
    let from = 0;
    for (let i = 0; i < L; i++) {
      const to = from + listN[i];
      if (listN[i] < 0 || to > header.postings) return undefined;
      listDoc.push((docs as Int32Array<ArrayBuffer>).subarray(from, to));
      listTf.push((tfs as Uint16Array<ArrayBuffer>).subarray(from, to));
      from = to;
    }
    if (from !== header.postings) return undefined;
    const parts: SpaceParts = {
      count: n,
      idWords: idWords as Int32Array<ArrayBuffer>,
      docLen: docLen as Int32Array<ArrayBuffer>,
      docCreated: docCreated as Float64Array<ArrayBuffer>,
      docEntity: docEntity as Int32Array<ArrayBuffer>,
      docStart: docStart as Int32Array<ArrayBuffer>,
      poolList: poolList as Int32Array<ArrayBuffer>,
      poolTf: poolTf as Uint16Array<ArrayBuffer>,
      listN,
      listMaxLen: listMaxLen as Int32Array<ArrayBuffer>,
      listDoc,
      listTf,
      postings: header.postings,
      table: table as Int32Array<ArrayBuffer>,
      terms: header.terms,
      entities: header.entities,
      otherIds: header.otherIds,
    };
    const hashes = sectionsOf(parts).map(hashOf);
    if (hashes.some((h, i) => h !== header.hashes[i])) return undefined;
    return { parts, atMs: s.atMs };
  } catch {
    return undefined;
  }
}

/** Deletes a namespace's snapshot (all of them without a namespace). */
export function dropSnapshots(dataDir: string, namespace?: string) {
  if (namespace === undefined) rmSync(snapshotDir(dataDir), { recursive: true, force: true });
  else rmSync(fileOf(dataDir, namespace), { force: true });
}
