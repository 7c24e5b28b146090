// A namespace's in-memory vectors (vector-cache.ts: codes, cells, 4-bit copies) saved in a file
// beside the store, so that the first semantic or hybrid search after a start reads them (a second
// or two at 1,000,000) instead of reading and encoding every vector again (21 s in memory, minutes
// through LMDB under load). Written behind the store path (after a namespace's vectors are first
// loaded, when enough has changed, at close), never in a write transaction.
//
// Exact once caught up (vector-cache.ts): the file records the namespace's newest event the copy
// had followed (as of the settled seq, as keyword snapshots do: keyword-snapshot.ts), and the load
// re-reads the vector of every memory named by the events after it, then walks the namespace's
// vector keys (keys only) to add those it lacks (the embedding worker writes vectors without an
// event, but only under keys that had none: a changed memory's vector is removed in its event's
// transaction) and drop those gone. A file of another build, format, clock epoch (`memd import`)
// or search epoch (`memd reindex`) is ignored; so is a torn or damaged one (its hash). The hash
// covers every section but the keeper's (the 4-bit copy, 70% of the file: its lengths are checked
// instead): hashing them would read 390 MB at 1,000,000 before the first search, and a damaged
// 4-bit vector only changes which candidates are read exactly, never an answer's score (each is
// the stored vector's) nor which memories can answer (each is checked against its record).
// An erasure deletes its namespace's file (and calls off one being written); `memd compact`
// deletes them all (the search directory).
import { closeSync, fsync, mkdirSync, openSync, renameSync, rmSync, writeSync } from "node:fs";
import { join } from "node:path";
import type { VectorHeader } from "../../index/vector";
import { snapshotBuild } from "../snapshot-build";
import { snapshotDir } from "./keyword-snapshot";

const MAGIC = "memd-vectors-4";

/** Which state of the store a snapshot belongs to (as keyword snapshots: keyword-snapshot.ts SnapshotStamp). */
export type VectorStamp = {
  format: number;
  clockEpoch: number;
  searchEpoch: number;
  atMs: number;
  atSeq: number;
  /**
   * The embedding worker's mark (meta "vectorMark", a new one per commit of its vectors) when the
   * copy held every commit made (no write in flight), or null: the load walks the keys unless the
   * mark is still this one.
   */
  mark: number | null;
};

type Header = {
  magic: string;
  build: string;
  namespace: string;
  stamp: VectorStamp;
  space: VectorHeader;
  /** Each section's length in bytes (each starts 8-byte aligned), and the hash of the first `hashed`. */
  lengths: number[];
  hashed: number;
  hash: string;
};

const align8 = (n: number) => Math.ceil(n / 8) * 8;
const fileOf = (dataDir: string, namespace: string) =>
  join(snapshotDir(dataDir), `vectors-${Bun.hash(namespace).toString(16)}.bin`);

/** A snapshot being written (cancel: set `cancelled`; its temporary file is then removed, never renamed). */
export type VectorJob = { tmp: string; cancelled: boolean };
let jobs = 0;
export const vectorJob = (dataDir: string, namespace: string): VectorJob => ({
  tmp: `${fileOf(dataDir, namespace)}.${process.pid}.${++jobs}.tmp`,
  cancelled: false,
});

/**
 * Writes `sections` (VectorSpace.freeze's, copies; the first `hashed` of them hashed: those before
 * its keeper's) through the job's temporary file, `between` awaited after each MiB written, then
 * fsyncs and renames it over the last one. Returns whether it was renamed into place.
 */
export async function writeVectorSnapshot(
  dataDir: string,
  namespace: string,
  stamp: VectorStamp,
  space: VectorHeader,
  sections: ArrayBufferView[],
  hashed: number,
  job: VectorJob,
  between: () => Promise<unknown>,
): Promise<boolean> {
  const bytes = sections.map((b) => new Uint8Array(b.buffer, b.byteOffset, b.byteLength));
  let hash: number | bigint = 0;
  for (const b of bytes.slice(0, hashed)) hash = Bun.hash(b, hash);
  const header: Header = {
    magic: MAGIC,
    build: snapshotBuild(),
    namespace,
    stamp,
    space,
    lengths: bytes.map((b) => b.length),
    hashed,
    hash: hash.toString(16),
  };
  const head = Buffer.from(JSON.stringify(header));
  mkdirSync(snapshotDir(dataDir), { recursive: true });
  const fd = openSync(job.tmp, "w");
  let renamed = false;
  try {
    const prefix = new Uint8Array(align8(8 + head.length));
    new DataView(prefix.buffer).setUint32(0, head.length, true);
    prefix.set(head, 8);
    let at = 0;
    const put = async (b: Uint8Array) => {
      for (let k = 0; k < b.length; ) {
        const n = writeSync(fd, b, k, Math.min(b.length - k, 1 << 20), at);
        k += n;
        at += n;
        await between();
        if (job.cancelled) throw new Error("cancelled");
      }
    };
    await put(prefix);
    for (const b of bytes) {
      at = align8(at);
      await put(b);
    }
    await new Promise<void>((resolve, reject) => fsync(fd, (e) => (e ? reject(e) : resolve())));
    if (job.cancelled) return false;
    renameSync(job.tmp, fileOf(dataDir, namespace));
    renamed = true;
    return true;
  } catch (e) {
    if (job.cancelled) return false;
    throw e;
  } finally {
    closeSync(fd);
    if (!renamed) rmSync(job.tmp, { force: true });
  }
}

/**
 * The namespace's snapshot, if there is one of this build and of `stamp`'s epochs (atMs, atSeq
 * aside), whole: its space's header, its sections (8-byte aligned views of one buffer read from
 * the file), and the events it follows.
 */
export function readVectorSnapshot(
  dataDir: string,
  namespace: string,
  stamp: Omit<VectorStamp, "atMs" | "atSeq" | "mark">,
):
  | {
      space: VectorHeader;
      sections: Uint8Array<ArrayBuffer>[];
      at: { atMs: number; atSeq: number; mark: number | null };
    }
  | undefined {
  try {
    // Mapped, private (page aligned, so the sections' views are 8-byte aligned): the thaw copies
    // what it keeps but the 4-bit copy's full blocks (four-bit.ts), whose pages are read from the
    // file as searches use them (and copied when a change writes to one).
    const all = Bun.mmap(fileOf(dataDir, namespace), { shared: false }) as Uint8Array<ArrayBuffer>;
    const length = new DataView(all.buffer, all.byteOffset).getUint32(0, true);
    if (8 + length > all.length) return undefined;
    const header = JSON.parse(Buffer.from(all.subarray(8, 8 + length)).toString()) as Header;
    const s = header.stamp;
    if (
      header.magic !== MAGIC ||
      header.build !== snapshotBuild() ||
      header.namespace !== namespace ||
      s.format !== stamp.format ||
      s.clockEpoch !== stamp.clockEpoch ||
      s.searchEpoch !== stamp.searchEpoch
    )
      return undefined;
    let at = align8(8 + length);
    const sections: Uint8Array<ArrayBuffer>[] = [];
    let hash: number | bigint = 0;
    for (const [i, n] of header.lengths.entries()) {
      at = align8(at);
      if (at + n > all.length) return undefined;
      const b = all.subarray(at, at + n);
      if (i < header.hashed) hash = Bun.hash(b, hash);
      sections.push(b);
      at += n;
    }
    if (hash.toString(16) !== header.hash) return undefined;
    return { space: header.space, sections, at: { atMs: s.atMs, atSeq: s.atSeq, mark: s.mark ?? null } };
  } catch {
    return undefined;
  }
}

/** Deletes a namespace's vector snapshot. */
export function dropVectorSnapshot(dataDir: string, namespace: string) {
  rmSync(fileOf(dataDir, namespace), { force: true });
}
