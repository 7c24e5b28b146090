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
// differ is ignored. A torn or damaged file fails a section's hash and is ignored too (the
// per-document sections' spare room, which documents added after the read are written into in
// the private mapping, is not hashed: what is there is written over before it is read).
// Erasures: an erasure deletes its namespace's snapshot (a later one holds only what is current);
// `memd compact` deletes every snapshot (compact.ts), so no file keeps an erased memory's words.
import {
  closeSync,
  existsSync,
  fsync,
  ftruncateSync,
  mkdirSync,
  openSync,
  readdirSync,
  renameSync,
  rmSync,
  writeSync,
} from "node:fs";
import { join } from "node:path";
import type { FrozenSpace, Piece, SpaceParts } from "../../index/keyword";
import { snapshotBuild } from "../snapshot-build";

const MAGIC = "memd-keywords-8";

/** The snapshots' directory in a data dir. */
export const snapshotDir = (dataDir: string) => join(dataDir, "search");

const fileOf = (dataDir: string, namespace: string) =>
  join(snapshotDir(dataDir), `keywords-${Bun.hash(namespace).toString(16)}.bin`);

const build = snapshotBuild;

/** Which state of the store a snapshot belongs to. */
/**
 * Which state of the store a snapshot belongs to: the data dir's epochs, and the namespace's
 * events it follows (every one up to seq atSeq: those before time atMs, and those of that time
 * up to that seq).
 */
export type SnapshotStamp = { format: number; clockEpoch: number; searchEpoch: number; atMs: number; atSeq: number };

/** The file's header: the frozen space's sizes and names, what it belongs to, and its sections' hashes. */
type Header = Omit<FrozenSpace, "pieces" | "release"> & {
  magic: string;
  build: string;
  namespace: string;
  stamp: SnapshotStamp;
  /** The hash of each section (FrozenSpace's order), 16 hex digits each. */
  hashes: string[];
  /** Spare room after the per-document sections: documents, and bytes of the pool (see roomOf). */
  room: number;
  poolRoom: number;
};

const align8 = (n: number) => Math.ceil(n / 8) * 8;
/** A section is hashed in blocks of this many bytes, each hash the next one's seed. */
const BLOCK = 1 << 20;
const hex16 = (h: number | bigint) => h.toString(16).padStart(16, "0");
const bytesOf = (x: Piece) => new Uint8Array(x.buffer, x.byteOffset, x.byteLength);
/** A section's hash: over its bytes in blocks of BLOCK (as writeSnapshot makes it). */
const hashOf = (bytes: Uint8Array) => {
  let h: number | bigint = 0;
  for (let at = 0; at < bytes.length; at += BLOCK) h = Bun.hash(bytes.subarray(at, at + BLOCK), h);
  return hex16(h);
};

/**
 * Spare room left after each per-document section (zeros, a hole in the file): the documents
 * added after a snapshot is read are written there, in the private mapping (only the pages
 * touched become the process's memory), instead of each per-document array being copied out
 * onto the heap at the first add (~110 MB at 1,000,000). An eighth covers the adds until the
 * next save (snapshotting.after: a tenth of the namespace).
 */
const roomOf = (count: number, pool: number) => ({
  room: Math.max(1024, count >> 3),
  poolRoom: Math.max(8192, pool >> 3),
});

/** The sections' item types, counts, and capacities (counts plus spare room), in order (FrozenSpace). */
const layout = (
  count: number,
  pool: number,
  lists: number,
  postings: number,
  table: number,
  { room, poolRoom }: { room: number; poolRoom: number },
) =>
  [
    [Int32Array, count * 4, (count + room) * 4],
    [Int32Array, count, count + room],
    [Float64Array, count, count + room],
    [Int32Array, count, count + room],
    [Int32Array, count + 1, count + 1 + room],
    [Uint8Array, pool, pool + poolRoom],
    [Int32Array, lists, lists],
    [Int32Array, lists, lists],
    [Int32Array, postings, postings],
    [Uint16Array, postings, postings],
    [Int32Array, table, table],
  ] as const;

/** Data dirs whose leftover temporary files this process removed. */
const swept = new Set<string>();

/** A snapshot being written: its temporary file, and whether it was called off (then the file is not renamed). */
export type SnapshotJob = { tmp: string; cancelled: boolean };
let jobs = 0;

/** The temporary file a job writes (cancel: set `cancelled` and delete it, see keyword-cache.ts). */
export const snapshotJob = (dataDir: string, namespace: string): SnapshotJob => ({
  tmp: `${fileOf(dataDir, namespace)}.${process.pid}.${++jobs}.tmp`,
  cancelled: false,
});

/**
 * Writes a snapshot of `f` through the job's temporary file, then renames it over the last one:
 * in pieces of at most 1 MiB, `pace.between` awaited once the pieces have held the turn for
 * `pace.turnMs` (so requests are served meanwhile: `f` stays what it was when frozen); the fsync
 * runs off the main thread. Returns whether it was renamed into place (not if cancelled).
 */
export async function writeSnapshot(
  dataDir: string,
  namespace: string,
  stamp: SnapshotStamp,
  f: FrozenSpace,
  job: SnapshotJob,
  pace: { turnMs: number; between: () => Promise<unknown> },
): Promise<boolean> {
  const room = roomOf(f.count, f.pool);
  const sizes = layout(f.count, f.pool, f.terms.length, f.postings, f.table, room);
  const header: Header = {
    magic: MAGIC,
    build: build(),
    namespace,
    stamp,
    count: f.count,
    pool: f.pool,
    postings: f.postings,
    table: f.table,
    terms: f.terms,
    entities: f.entities,
    otherIds: f.otherIds,
    hashes: sizes.map(() => hex16(0)),
    ...room,
  };
  const headOf = () => Buffer.from(JSON.stringify(header));
  let head = headOf();
  const start = align8(8 + head.length);
  mkdirSync(snapshotDir(dataDir), { recursive: true });
  // A write cut short by a crash left its temporary file: the first save of a process removes them.
  if (!swept.has(dataDir)) {
    swept.add(dataDir);
    for (const x of readdirSync(snapshotDir(dataDir)))
      if (x.endsWith(".tmp")) rmSync(join(snapshotDir(dataDir), x), { force: true });
  }
  const fd = openSync(job.tmp, "w");
  let renamed = false;
  try {
    // The sections, each hashed in blocks of BLOCK as they pass through a staging buffer.
    const stage = new Uint8Array(BLOCK);
    let staged = 0;
    let at = start;
    let section = 0;
    let hash: number | bigint = 0;
    let sectionBytes = 0;
    let sectionStart = start;
    let turn = performance.now();
    const flush = () => {
      if (staged === 0) return;
      hash = Bun.hash(stage.subarray(0, staged), hash);
      for (let w = 0; w < staged; ) w += writeSync(fd, stage, w, staged - w, at + w);
      at += staged;
      staged = 0;
    };
    /**
     * Ends the current section: its hash; then its spare room and zeros up to a multiple of 8
     * bytes, not written (a hole: zeros; ftruncate below sets the file's length).
     */
    const endSection = () => {
      flush();
      const [T, items, capacity] = sizes[section];
      if (sectionBytes !== items * T.BYTES_PER_ELEMENT)
        throw new Error(`snapshot section ${section}: ${sectionBytes} bytes`);
      header.hashes[section] = hex16(hash);
      at = sectionStart = sectionStart + align8(capacity * T.BYTES_PER_ELEMENT);
      section++;
      hash = 0;
      sectionBytes = 0;
    };
    for (const [s, piece] of f.pieces(BLOCK)) {
      while (section < s) endSection();
      const bytes = bytesOf(piece);
      sectionBytes += bytes.length;
      for (let k = 0; k < bytes.length; ) {
        const n = Math.min(bytes.length - k, BLOCK - staged);
        stage.set(bytes.subarray(k, k + n), staged);
        staged += n;
        k += n;
        if (staged === BLOCK) flush();
      }
      if (performance.now() - turn >= pace.turnMs) {
        await pace.between();
        if (job.cancelled) return false;
        turn = performance.now();
      }
    }
    while (section < sizes.length) endSection();
    ftruncateSync(fd, at);
    // The header, with the hashes (the same length as the placeholders).
    head = headOf();
    const prefix = new Uint8Array(start);
    new DataView(prefix.buffer).setUint32(0, head.length, true);
    prefix.set(head, 8);
    writeSync(fd, prefix, 0, prefix.length, 0);
    await new Promise<void>((resolve, reject) => fsync(fd, (e) => (e ? reject(e) : resolve())));
    if (job.cancelled) return false;
    renameSync(job.tmp, fileOf(dataDir, namespace));
    renamed = true;
    return true;
  } finally {
    closeSync(fd);
    if (!renamed) rmSync(job.tmp, { force: true });
  }
}

/**
 * What a usable snapshot of the namespace covers, from its header alone (its sections are not
 * read or checked): its documents and the events it follows; undefined when there is none, or it
 * belongs to another build or epoch (keyword-cache.ts' background builds ask this).
 */
export function snapshotCovers(
  dataDir: string,
  namespace: string,
  stamp: Omit<SnapshotStamp, "atMs" | "atSeq">,
): { count: number; at: { atMs: number; atSeq: number } } | undefined {
  const file = fileOf(dataDir, namespace);
  // (Most namespaces have none: an error thrown and caught for each, its stack and all, made most
  // of the garbage of the background look over 10,000 small namespaces, issue 32.)
  if (!existsSync(file)) return undefined;
  try {
    const found = headerOf(Bun.mmap(file, { shared: false }), namespace, stamp);
    return (
      found && { count: found.header.count, at: { atMs: found.header.stamp.atMs, atSeq: found.header.stamp.atSeq } }
    );
  } catch {
    return undefined;
  }
}

/** A mapped snapshot's header and where its arrays start, if it is whole there and of this namespace, build and stamp. */
function headerOf(
  bytes: Uint8Array,
  namespace: string,
  stamp: Omit<SnapshotStamp, "atMs" | "atSeq">,
): { header: Header; length: number } | undefined {
  const length = new DataView(bytes.buffer, bytes.byteOffset).getUint32(0, true);
  if (8 + length > bytes.length) return undefined;
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
  return { header, length };
}

/**
 * The parts of a namespace's snapshot (KeywordSpace.fromParts), if there is one of this stamp
 * (atMs aside), whole. Its arrays view the file, mapped private (they are not the process's
 * anonymous memory, and a change to them is not written back to the file: only the pages
 * written, such as the spare room's that adds fill, become the process's own). `verify` false skips
 * the sections' hashes (for the file this process has just written).
 */
export function readSnapshot(
  dataDir: string,
  namespace: string,
  stamp: Omit<SnapshotStamp, "atMs" | "atSeq">,
  verify = true,
): { parts: SpaceParts; at: { atMs: number; atSeq: number } } | undefined {
  try {
    // Mapped (8-byte aligned: page aligned); an empty or missing file throws.
    const bytes = Bun.mmap(fileOf(dataDir, namespace), { shared: false });
    const found = headerOf(bytes, namespace, stamp);
    if (!found) return undefined;
    const { header, length } = found;
    let at = align8(8 + length);
    const L = header.terms.length;
    const n = header.count;
    const out: Piece[] = [];
    const sizes = layout(n, header.pool, L, header.postings, header.table, header);
    for (const [i, [T, count, capacity]] of sizes.entries()) {
      if (at + capacity * T.BYTES_PER_ELEMENT > bytes.length) return undefined;
      // (A per-document section's view takes its spare room too: adds are written there.)
      const section = new T(bytes.buffer, bytes.byteOffset + at, capacity);
      if (verify && hashOf(bytesOf(section.subarray(0, count))) !== header.hashes[i]) return undefined;
      out.push(section);
      at += align8(capacity * T.BYTES_PER_ELEMENT);
    }
    if (at !== bytes.length) return undefined;
    const [idWords, docLen, docCreated, docEntity, docStart, pool, lengths, listMaxLen, docs, tfs, table] = out;
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
    return {
      parts: {
        count: n,
        idWords: idWords as Int32Array<ArrayBuffer>,
        docLen: docLen as Int32Array<ArrayBuffer>,
        docCreated: docCreated as Float64Array<ArrayBuffer>,
        docEntity: docEntity as Int32Array<ArrayBuffer>,
        docStart: docStart as Int32Array<ArrayBuffer>,
        pool: pool as Uint8Array<ArrayBuffer>,
        listN,
        listMaxLen: listMaxLen as Int32Array<ArrayBuffer>,
        listDoc,
        listTf,
        postings: header.postings,
        terms: header.terms,
        entities: header.entities,
        otherIds: header.otherIds,
        table: table as Int32Array<ArrayBuffer>,
      },
      at: { atMs: header.stamp.atMs, atSeq: header.stamp.atSeq },
    };
  } catch {
    return undefined;
  }
}

/** Deletes a namespace's snapshot (all of them without a namespace). */
export function dropSnapshots(dataDir: string, namespace?: string) {
  if (namespace === undefined) rmSync(snapshotDir(dataDir), { recursive: true, force: true });
  else rmSync(fileOf(dataDir, namespace), { force: true });
}
