// Search snapshots in PostgreSQL (issue 32): a namespace's keyword lists (keyword-cache.ts) and
// vectors (vector-cache.ts) as the replica that built them held them, written in the database so
// that every other replica, and this one after a restart or a deploy, reads them (a few seconds at
// 1,000,000 memories) instead of building them again from every memory (13-57 s).
//
// A snapshot is a copy's state at one clock time of its namespace (`upto`, as its follower keeps
// it: follow.ts) under one epoch; a replica that reads it catches up from that time through the
// events table and the vectors' stamps before any search uses it, exactly as a copy built from the
// rows does: so a snapshot older than the database (a replica killed after writing it, writes
// since) misses nothing. One of another build (terms depend on the tokenizer) or epoch (an
// import, a rebuild of the vectors) is not used.
//
// Written in one transaction: the parts under a new token, then, holding the namespace's clock
// row (as every write of its memories does, an erasure's included), a check that no erasure
// committed after `upto` and that the epoch is still the copy's, and the row naming the new
// token (the old parts deleted). An erasure deletes its namespace's snapshots in its own
// transaction: so no snapshot holding an erased memory can be committed before or after it.
import { randomUUID } from "node:crypto";
import type { SQL } from "bun";
import { snapshotBuild } from "../snapshot-build";

/** Sizes (tests make them small). */
export const pgSnapshots = {
  /** Bytes per part (one row, one statement). */
  part: 4 << 20,
  /** Written again once a copy has applied this share of its size in changes since the last one. */
  again: 0.25,
  /** What runs between parts, written or read (tests make it wait). */
  between: (): Promise<unknown> => new Promise((resolve) => setImmediate(resolve)),
};

export type SnapshotKind = "keyword" | "vector";

/** A snapshot's piece: typed-array bytes of one section. */
type Piece = ArrayBufferView;

/** What a reader gets back: the header it was written with, its clock time and its sections. */
export interface ReadSnapshot<H> {
  upto: number;
  header: H;
  /** Each section's bytes, 8-byte aligned views of one buffer. */
  sections: Uint8Array<ArrayBuffer>[];
}

const align8 = (n: number) => Math.ceil(n / 8) * 8;

/** The epoch now of namespace `ns` (SQL), as a copy of this kind compares it (follow.ts startingPoint's). */
const epochNow = (kind: SnapshotKind, ns = "$1") =>
  kind === "keyword"
    ? `COALESCE((SELECT epoch FROM search_epochs WHERE namespace = ${ns}), 0)`
    : "(SELECT vector_epoch FROM search_state WHERE id = 1)";

/**
 * Writes a snapshot of `namespace`'s copy of this kind: its sections (pieces with their section's
 * number, in order), then `header` (with each section's length) in the row. Returns whether it
 * was committed: false when an erasure committed after `upto`, the epoch moved, or `cancelled()`.
 */
export async function writeSnapshot(
  sql: SQL,
  namespace: string,
  kind: SnapshotKind,
  at: { upto: number; epoch: number },
  pieces: Iterable<[number, Piece]>,
  header: Record<string, unknown>,
  cancelled: () => boolean = () => false,
): Promise<boolean> {
  const token = randomUUID();
  return sql.begin(async (tx) => {
    await tx`SET LOCAL statement_timeout = 0`; // as long as the copy is large
    const stage = new Uint8Array(pgSnapshots.part);
    let staged = 0;
    let part = 0;
    let bytes = 0;
    const lengths: number[] = [];
    const flush = async () => {
      if (staged === 0) return;
      const b64 = Buffer.from(stage.buffer, 0, staged).toString("base64");
      await tx`INSERT INTO search_snapshot_parts (namespace, kind, token, part, data)
          VALUES (${namespace}, ${kind}, ${token}, ${part++}, decode(${b64}, 'base64'))`;
      bytes += staged;
      staged = 0;
      await pgSnapshots.between();
    };
    const put = async (b: Uint8Array) => {
      for (let k = 0; k < b.length; ) {
        const n = Math.min(b.length - k, stage.length - staged);
        stage.set(b.subarray(k, k + n), staged);
        staged += n;
        k += n;
        if (staged === stage.length) await flush();
      }
    };
    let offset = 0;
    for (const [section, piece] of pieces) {
      while (lengths.length <= section) {
        // A new section starts 8-byte aligned (zeros between).
        const pad = align8(offset) - offset;
        if (pad > 0) await put(new Uint8Array(pad));
        offset += pad;
        lengths.push(0);
      }
      const b = new Uint8Array(piece.buffer, piece.byteOffset, piece.byteLength);
      await put(b);
      lengths[section] += b.length;
      offset += b.length;
      if (cancelled()) return false;
    }
    await flush();
    if (cancelled()) return false;
    // The namespace's clock row: erasures and every other write of its memories wait from here.
    await tx`SELECT last_ms FROM namespace_clock WHERE namespace = ${namespace} FOR UPDATE`;
    const [ok] = await tx.unsafe(
      `SELECT ${epochNow(kind)} = $2 AS same_epoch,
         EXISTS (SELECT 1 FROM events WHERE namespace = $1 AND at_ms > $3 AND reason = 'erased') AS erased`,
      [namespace, at.epoch, at.upto],
    );
    if (!ok.same_epoch || ok.erased) {
      await tx`DELETE FROM search_snapshot_parts WHERE namespace = ${namespace} AND kind = ${kind} AND token = ${token}`;
      return false;
    }
    await tx`DELETE FROM search_snapshot_parts WHERE namespace = ${namespace} AND kind = ${kind} AND token <> ${token}`;
    const row = {
      namespace,
      kind,
      build: snapshotBuild(),
      epoch: at.epoch,
      upto: at.upto,
      token,
      parts: part,
      bytes,
      header: JSON.stringify({ ...header, lengths }),
      written_at: Date.now(),
    };
    await tx`INSERT INTO search_snapshots ${tx(row)}
        ON CONFLICT (namespace, kind) DO UPDATE SET build = EXCLUDED.build, epoch = EXCLUDED.epoch,
          upto = EXCLUDED.upto, token = EXCLUDED.token, parts = EXCLUDED.parts, bytes = EXCLUDED.bytes,
          header = EXCLUDED.header, written_at = EXCLUDED.written_at`;
    return true;
  });
}

/**
 * The namespace's snapshot of this kind, of this build and of `epoch`, read part by part; undefined
 * when there is none usable (the caller builds instead). One replaced while read (another replica
 * wrote it again: the parts read are gone) is read again, the new one, up to three times: a
 * replica starting would otherwise build the copy from the rows before it is ready.
 */
export async function readSnapshot<H>(
  db: <T>(fn: () => Promise<T>) => Promise<T>,
  sql: SQL,
  namespace: string,
  kind: SnapshotKind,
  epoch: number,
): Promise<ReadSnapshot<H> | undefined> {
  for (let attempt = 0; attempt < 3; attempt++) {
    const read = await readOnce<H>(db, sql, namespace, kind, epoch);
    if (read !== "replaced") return read;
  }
  return undefined;
}

async function readOnce<H>(
  db: <T>(fn: () => Promise<T>) => Promise<T>,
  sql: SQL,
  namespace: string,
  kind: SnapshotKind,
  epoch: number,
): Promise<ReadSnapshot<H> | undefined | "replaced"> {
  const [row] = await db(
    () => sql`SELECT upto, token, parts, bytes, header FROM search_snapshots
        WHERE namespace = ${namespace} AND kind = ${kind} AND build = ${snapshotBuild()} AND epoch = ${epoch}`,
  );
  if (!row) return undefined;
  const total = Number(row.bytes);
  const all = new Uint8Array(total);
  let at = 0;
  for (let part = 0; part < Number(row.parts); part++) {
    const [p] = await db(
      () => sql`SELECT data FROM search_snapshot_parts
          WHERE namespace = ${namespace} AND kind = ${kind} AND token = ${row.token} AND part = ${part}`,
    );
    // (Replaced meanwhile: its parts are gone.)
    if (!p) return "replaced";
    const data = p.data as Uint8Array;
    if (at + data.length > total) return undefined;
    all.set(data, at);
    at += data.length;
    await pgSnapshots.between();
  }
  if (at !== total) return undefined;
  const header = JSON.parse(row.header as string) as H & { lengths: number[] };
  const sections: Uint8Array<ArrayBuffer>[] = [];
  let from = 0;
  for (const n of header.lengths) {
    from = align8(from);
    if (from + n > total) return undefined;
    sections.push(new Uint8Array(all.buffer, from, n));
    from += n;
  }
  return { upto: Number(row.upto), header, sections };
}

/**
 * The snapshots of this build and of their namespace's epoch now, newest first: what a replica
 * reads at start. (One of an older epoch, left by an import or a reindex until a replica writes
 * the copy again, cannot be read: preloading its namespace would build the copy from the rows
 * before the replica is ready.)
 */
export async function listSnapshots(
  db: <T>(fn: () => Promise<T>) => Promise<T>,
  sql: SQL,
): Promise<{ namespace: string; kind: SnapshotKind; bytes: number }[]> {
  const rows = await db(() =>
    sql.unsafe(
      `SELECT s.namespace, s.kind, s.bytes FROM search_snapshots s
        WHERE s.build = $1 AND s.epoch = CASE WHEN s.kind = 'keyword'
          THEN ${epochNow("keyword", "s.namespace")} ELSE ${epochNow("vector")} END
        ORDER BY s.written_at DESC`,
      [snapshotBuild()],
    ),
  );
  return rows.map((r: Record<string, unknown>) => ({
    namespace: r.namespace as string,
    kind: r.kind as SnapshotKind,
    bytes: Number(r.bytes),
  }));
}

/** A section's bytes as items of T (a view: the section is 8-byte aligned). */
export function viewAs<T extends Int32Array | Uint16Array | Uint8Array | Float64Array | Float32Array>(
  make: { new (b: ArrayBuffer, at: number, n: number): T; BYTES_PER_ELEMENT: number },
  s: Uint8Array<ArrayBuffer>,
): T {
  return new make(s.buffer, s.byteOffset, s.byteLength / make.BYTES_PER_ELEMENT);
}

/** A replica's reading of the database's snapshots at start (readiness waits for it: upkeep.ts). */
export interface Preload {
  /** Why the replica is not ready yet, or undefined once every snapshot that fits is read. */
  reason(): string | undefined;
  readonly done: Promise<void>;
}

/**
 * Reads the snapshots of this build into this replica's copies (`load` per kind: a copy's first
 * build, reading the snapshot and catching up), the newest as many as fit `budget` bytes, so the
 * namespaces they hold answer from memory from the first search after the replica is ready.
 * A failure ends it: those namespaces are built on their first search instead.
 */
export function preloadSnapshots(
  db: <T>(fn: () => Promise<T>) => Promise<T>,
  sql: SQL,
  budget: number,
  load: Partial<Record<SnapshotKind, (namespace: string) => Promise<unknown>>>,
): Preload {
  let total = 0;
  let read = 0;
  let finished = false;
  const done = (async () => {
    const all = (await listSnapshots(db, sql)).filter((s) => load[s.kind] !== undefined);
    // (The newest namespace's even when larger than the budget: the budget keeps the namespace
    // searched last whatever its size.)
    let room = budget;
    const first = all[0]?.namespace;
    const chosen = all.filter((s) => {
      if (s.bytes > room && s.namespace !== first) return false;
      room -= s.bytes;
      return true;
    });
    total = chosen.length;
    // Read oldest first: each copy read counts as its namespace's most recent use, so if the
    // copies hold more in memory than their snapshots' bytes (a 4-bit copy keeps room to grow)
    // and the budget releases some, it releases the oldest, not the newest read first.
    for (const s of chosen.reverse()) {
      await load[s.kind]!(s.namespace);
      read++;
    }
  })()
    .catch(() => undefined)
    .finally(() => {
      finished = true;
    });
  return {
    done,
    reason: () => (finished ? undefined : `reading the search snapshots in the database (${read} of ${total} read)`),
  };
}
