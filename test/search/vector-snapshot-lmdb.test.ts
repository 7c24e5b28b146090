// @targets lmdb
// Persisted vector codes on LMDB (issue 32, storage/lmdb/vector-snapshot.ts), through Storage with
// the index's sizes made small: a namespace's vectors (codes, cells, 4-bit copies), once loaded,
// are saved beside the store; after a restart the first semantic search reads that file instead
// of every vector, caught up with what committed after it (stores with a vector, deletes, edits,
// the embedding worker's vectors, which come without an event) however old it is, and answers
// exactly (ids and cosines computed here from what was stored). A reindex (another search epoch)
// is never read back; an erasure deletes the file.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { RowIds } from "../../src/index/vector/row-ids";
import { ann } from "../../src/index/vector/space";
import { openLmdb } from "../../src/storage/lmdb/index";
import { vectorSnapshots } from "../../src/storage/lmdb/vector-cache";
import type { MemoryOp } from "../../src/storage/storage";
import { tempDir } from "../helpers";
import { clustered, dot } from "./clustered-vectors";

const saved = { ann: { ...ann }, snap: { ...vectorSnapshots } };
const dir = tempDir("memd-vector-snapshot-");
beforeAll(() => {
  Object.assign(ann, { rescore: 150, cellsFrom: 300, cells: 16, probe: 1 / 4 });
  Object.assign(vectorSnapshots, { from: 100 });
});
afterAll(() => {
  Object.assign(ann, saved.ann);
  Object.assign(vectorSnapshots, saved.snap);
  dir.cleanup();
});

const ns = "snap";
const create = (id: string, i: number, vector: Float32Array | "pending"): MemoryOp => ({
  event: "ADD",
  create: { id, namespace: ns, entity: `e${i % 4}`, content: `m${i}`, category: "fact", importance: 0.5, vector },
});
const files = () => (existsSync(join(dir.dir, "search")) ? readdirSync(join(dir.dir, "search")) : []);

/** Waits (bounded, 30 s) for `check` to hold. */
async function until(what: string, check: () => boolean) {
  const deadline = Date.now() + 30_000;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`not within 30 s: ${what}`);
    await Bun.sleep(10);
  }
}

test("after a restart the first semantic search reads the snapshot, caught up, and answers exactly", async () => {
  const draw = clustered(71, 48);
  const vectors = new Map<string, Float32Array>();
  const entityOf = new Map<string, string>();
  let s = await openLmdb(dir.dir);
  const ops: MemoryOp[] = [];
  for (let i = 0; i < 1000; i++) {
    const id = Bun.randomUUIDv7();
    const v = draw();
    vectors.set(id, v);
    entityOf.set(id, `e${i % 4}`);
    ops.push(create(id, i, v));
  }
  // One memory pending before the snapshot, embedded after it (the worker's vector: no event).
  const early = Bun.randomUUIDv7();
  ops.push(create(early, 1, "pending"));
  entityOf.set(early, "e1");
  await s.apply(ops, null);
  // The first search loads the namespace; once loaded it is saved.
  await s.semanticSearch({ namespace: ns }, draw(), {}, 5);
  await until("the snapshot written", () => s.vectorCacheStats().written === 1);
  expect(files().some((f) => f.startsWith("vectors-") && f.endsWith(".bin"))).toBe(true);
  // No more saves from here (so the restart reads the old file and has to catch up).
  vectorSnapshots.from = Number.POSITIVE_INFINITY;

  const embed = async (id: string, v: Float32Array) => {
    const [p] = (await s.pendingEmbeddings(100)).filter((x) => x.id === id);
    expect(await s.setVectors([{ id, updatedAt: p.updatedAt, vector: v }])).toBe(1);
    vectors.set(id, v);
  };
  await embed(early, draw());
  const ids = [...vectors.keys()];
  // A store with its vector, a delete, an edit with a new vector, an edit left pending then embedded.
  const added = Bun.randomUUIDv7();
  const q = draw();
  await s.apply([create(added, 2, q)], null);
  vectors.set(added, q);
  entityOf.set(added, "e2");
  await s.apply([{ event: "DELETE", target: ids[3], reason: "test" }], null);
  vectors.delete(ids[3]);
  const moved = draw();
  await s.apply([{ event: "UPDATE", target: ids[4], patch: { content: "moved", vector: moved } }], null);
  vectors.set(ids[4], moved);
  await s.apply([{ event: "UPDATE", target: ids[5], patch: { content: "re-embedded", vector: "pending" } }], null);
  vectors.delete(ids[5]);
  await embed(ids[5], draw());
  await s.apply([{ event: "UPDATE", target: ids[6], patch: { content: "no vector now", vector: "pending" } }], null);
  vectors.delete(ids[6]);
  await s.close();

  s = await openLmdb(dir.dir);
  const exact = (x: Float32Array, entity?: string) =>
    [...vectors]
      .filter(([id]) => entity === undefined || entityOf.get(id) === entity)
      .map(([id, v]) => [id, dot(v, x)] as const)
      .sort((a, b) => b[1] - a[1]);
  const got = await s.semanticSearch({ namespace: ns }, q, {}, 3);
  // Read, and its keys walked: the worker embedded vectors after it.
  expect(s.vectorCacheStats()).toMatchObject({ read: 1, walked: 1 });
  expect(got[0].memory.id).toBe(added);
  for (let i = 0; i < 15; i++) {
    const x = i === 0 ? vectors.get(ids[5])! : i === 1 ? moved : draw();
    const entity = i % 3 === 2 ? "e1" : undefined;
    const answer = await s.semanticSearch({ namespace: ns, ...(entity ? { entity } : {}) }, x, {}, 10);
    const truth = exact(x, entity);
    for (const h of answer) expect(h.score).toBeCloseTo(dot(vectors.get(h.memory.id)!, x), 5);
    // The best is always found (the first two queries are a memory's own vector).
    expect(answer[0].memory.id).toBe(truth[0][0]);
    expect(answer.map((h) => h.memory.id)).not.toContain(ids[3]);
    expect(answer.map((h) => h.memory.id)).not.toContain(ids[6]);
  }
  // Every vector is there, and only those.
  const all = await s.semanticSearch({ namespace: ns }, q, {}, 5000);
  expect(new Set(all.map((h) => h.memory.id))).toEqual(new Set(vectors.keys()));

  // Changes with events only since the last snapshot (saved at a close with nothing in flight):
  // read back without walking the keys, and exact.
  vectorSnapshots.from = 100;
  await s.close(); // (saved: its catching up changed it)
  s = await openLmdb(dir.dir);
  await s.semanticSearch({ namespace: ns }, q, {}, 1);
  expect(s.vectorCacheStats()).toMatchObject({ read: 1, walked: 0 });
  vectorSnapshots.from = Number.POSITIVE_INFINITY;
  const later = Bun.randomUUIDv7();
  await s.apply([create(later, 3, q)], null);
  vectors.set(later, q);
  entityOf.set(later, "e3");
  await s.apply([{ event: "DELETE", target: added, reason: "test" }], null);
  vectors.delete(added);
  await s.close();
  s = await openLmdb(dir.dir);
  const again = await s.semanticSearch({ namespace: ns }, q, {}, 5000);
  expect(s.vectorCacheStats()).toMatchObject({ read: 1, walked: 0 });
  expect(again[0].memory.id).toBe(later);
  expect(new Set(again.map((h) => h.memory.id))).toEqual(new Set(vectors.keys()));

  // A reindex bumps the search epoch: the snapshot is not read again.
  vectorSnapshots.from = 100;
  await s.close();
  s = await openLmdb(dir.dir);
  await s.rebuildSearchIndex({ embeddings: true });
  await s.close();
  s = await openLmdb(dir.dir);
  expect(await s.semanticSearch({ namespace: ns }, q, {}, 5)).toEqual([]);
  expect(s.vectorCacheStats().read).toBe(0);
  await s.close();
}, 120_000);

test("an erasure deletes the namespace's vector snapshot", async () => {
  const d = tempDir("memd-vector-snapshot-erase-");
  vectorSnapshots.from = 100;
  try {
    const draw = clustered(73, 32);
    let s = await openLmdb(d.dir);
    await s.apply(
      Array.from({ length: 400 }, (_, i) => create(Bun.randomUUIDv7(), i, draw())),
      null,
    );
    await s.semanticSearch({ namespace: ns }, draw(), {}, 5);
    await until("the snapshot written", () => s.vectorCacheStats().written === 1);
    // (The embedding worker never wrote here: read back without walking the keys.)
    vectorSnapshots.from = Number.POSITIVE_INFINITY;
    await s.close();
    s = await openLmdb(d.dir);
    expect((await s.semanticSearch({ namespace: ns }, draw(), {}, 500)).length).toBe(400);
    expect(s.vectorCacheStats()).toMatchObject({ read: 1, walked: 0 });
    vectorSnapshots.from = 100;
    const vectorFiles = () => readdirSync(join(d.dir, "search")).filter((f) => f.startsWith("vectors-"));
    expect(vectorFiles()).toHaveLength(1);
    await s.erase(ns, "e1", null);
    expect(vectorFiles()).toHaveLength(0);
    await s.close();
  } finally {
    d.cleanup();
  }
}, 60_000);

/** Opened again on `dir`: the first semantic search reads the one snapshot saved, finds every vector and scores each exactly. */
async function expectSnapshotServes(dir: string, vectors: Map<string, Float32Array>, q: Float32Array) {
  const s = await openLmdb(dir);
  const got = await s.semanticSearch({ namespace: ns }, q, {}, 5000);
  expect(s.vectorCacheStats().read).toBe(1);
  expect(new Set(got.map((h) => h.memory.id))).toEqual(new Set(vectors.keys()));
  for (const h of got.slice(0, 10)) expect(h.score).toBeCloseTo(dot(vectors.get(h.memory.id)!, q), 5);
  await s.close();
}

test("a namespace growing past the threshold is followed and saved without a search (memd serve's prebuild), so the first search after a restart reads it", async () => {
  const d = tempDir("memd-vector-snapshot-follow-");
  Object.assign(vectorSnapshots, { from: 100, followMs: 20 });
  try {
    const draw = clustered(79, 32);
    const vectors = new Map<string, Float32Array>();
    const s = await openLmdb(d.dir, { keywordPrebuild: 100_000 });
    for (let k = 0; k < 6; k++) {
      const ops = Array.from({ length: 60 }, (_, i) => {
        const id = Bun.randomUUIDv7();
        const v = draw();
        vectors.set(id, v);
        return create(id, i, v);
      });
      await s.apply(ops, null);
    }
    // Never searched: followed once it held 100 vectors, saved, and again as it grew.
    await until("saved without a search", () => s.vectorCacheStats().written >= 1);
    await s.close();
    await expectSnapshotServes(d.dir, vectors, draw());
  } finally {
    Object.assign(vectorSnapshots, { followMs: saved.snap.followMs });
    d.cleanup();
  }
}, 60_000);

test("a namespace is followed from the commit that takes it past the threshold, not from the next timed look", async () => {
  const d = tempDir("memd-vector-snapshot-follow-at-commit-");
  // (The timed look never comes in this test: only the count at commit time can start it.)
  Object.assign(vectorSnapshots, { from: 100, followMs: 3_600_000 });
  try {
    const draw = clustered(83, 32);
    const vectors = new Map<string, Float32Array>();
    const s = await openLmdb(d.dir, { keywordPrebuild: 100_000 });
    const store = async (n: number) => {
      const ops = Array.from({ length: n }, (_, i) => {
        const id = Bun.randomUUIDv7();
        const v = draw();
        vectors.set(id, v);
        return create(id, i, v);
      });
      await s.apply(ops, null);
    };
    await store(60);
    await store(60);
    // Loaded in the background and saved, never searched.
    await until("followed and saved at the commit", () => s.vectorCacheStats().written >= 1);
    await s.close();
    await expectSnapshotServes(d.dir, vectors, draw());
  } finally {
    Object.assign(vectorSnapshots, { followMs: saved.snap.followMs });
    d.cleanup();
  }
}, 60_000);

test("row ids (the row of an id, in typed arrays): as a list of ids through sets, deletes, moves, freeze and thaw", () => {
  let ids = new RowIds();
  const rows: string[] = [];
  let seed = 7;
  const rand = () => {
    seed ^= seed << 13;
    seed ^= seed >>> 17;
    seed ^= seed << 5;
    return (seed >>> 0) / 4294967296;
  };
  for (let step = 0; step < 20000; step++) {
    if (rows.length === 0 || rand() < 0.6) {
      const id = rand() < 0.1 ? `other-${step}` : Bun.randomUUIDv7();
      ids.reserve(rows.length + 1);
      ids.set(rows.length, id);
      rows.push(id);
    } else {
      const r = Math.floor(rand() * rows.length);
      const last = rows.length - 1;
      ids.delete(r);
      if (r !== last) {
        ids.move(last, r);
        rows[r] = rows[last];
      }
      rows.pop();
    }
    if (step % 5000 === 4999) {
      const f = ids.freeze(rows.length);
      // (Its table taken back, or made again from the rows.)
      ids = RowIds.thaw(f.words, f.uuid, step % 10000 === 4999 ? f.table : new Int32Array(0), f.other, rows.length)!;
      ids.reserve(rows.length + 1000);
    }
  }
  rows.forEach((id, r) => {
    expect(ids.find(id)).toBe(r);
    expect(ids.idAt(r)).toBe(id);
  });
  expect(ids.find(Bun.randomUUIDv7())).toBe(-1);
});
