// @targets postgres pgbouncer
// Vector copies persisted in PostgreSQL (issue 32, storage/postgres/snapshots.ts), through Storage:
// storages on one database are replicas. A replica that builds a namespace's vectors (codes, cells
// and 4-bit copies) writes them; one opened later reads them before it is ready (notReadyReason
// says so until then), catches up with what committed since (apply's changes, the embedding
// worker's vectors without an event, a delete), and answers semantic searches exactly as the
// replica that built them (same ids, same exact cosines). A rebuild of the vectors (another
// epoch) is never read back; an erasure deletes the snapshot.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { FourBit } from "../../src/index/vector/four-bit";
import { ann, VectorSpace } from "../../src/index/vector/space";
import { openPostgres, type PostgresStorage } from "../../src/storage/postgres/index";
import { pgSnapshots } from "../../src/storage/postgres/snapshots";
import { pgVectors } from "../../src/storage/postgres/vector-cache";
import type { MemoryOp } from "../../src/storage/storage";
import { freshDatabase, throughPooler } from "../helpers";
import { clustered, dot } from "./clustered-vectors";

const saved = { ann: { ...ann }, pg: { ...pgVectors } };
let url = "";
const opened: PostgresStorage[] = [];
const open = async (snapshotFrom = 100) => {
  const s = await openPostgres({
    url,
    pool: 4,
    pooler: process.env.MEMD_TEST_POOLER_URL ? "transaction" : "none",
    connectTimeoutMs: 5000,
    statementTimeoutMs: 10000,
    keywordLists: false,
    snapshotFrom,
  });
  opened.push(s);
  return s;
};
beforeAll(async () => {
  Object.assign(ann, { rescore: 150, cellsFrom: 300, cells: 16, probe: 1 / 4 });
  Object.assign(pgVectors, { exactBelow: 50, slice: 97 });
  url = throughPooler(await freshDatabase());
}, 60_000);
afterAll(async () => {
  Object.assign(ann, saved.ann);
  Object.assign(pgVectors, saved.pg);
  await Promise.all(opened.map((s) => s.close()));
});

const create = (id: string, ns: string, i: number, vector: Float32Array | "pending"): MemoryOp => ({
  event: "ADD",
  create: { id, namespace: ns, entity: `e${i % 4}`, content: `m${i}`, category: "fact", importance: 0.5, vector },
});

/** Waits (bounded, 60 s) for `check` to hold. */
async function until(what: string, check: () => Promise<boolean> | boolean) {
  const deadline = Date.now() + 60_000;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`not within 60 s: ${what}`);
    await Bun.sleep(20);
  }
}

const answer = async (s: PostgresStorage, ns: string, q: Float32Array, entity?: string) =>
  (await s.semanticSearch({ namespace: ns, ...(entity ? { entity } : {}) }, q, {}, 10)).map((h) => [
    h.memory.id,
    h.score.toFixed(6),
  ]);

test("a replica opened later reads the copy another built, caught up, and answers as it does", async () => {
  const a = await open();
  const draw = clustered(57, 64);
  const ns = "snap-vectors";
  const vectors = new Map<string, Float32Array>();
  const ops: MemoryOp[] = [];
  for (let i = 0; i < 1200; i++) {
    const id = Bun.randomUUIDv7();
    const v = draw();
    vectors.set(id, v);
    ops.push(create(id, ns, i, v));
  }
  for (let i = 0; i < ops.length; i += 400) await a.apply(ops.slice(i, i + 400), null);
  // A's first search starts its build; once built it writes the copy (1,200 ≥ 100 vectors).
  await a.semanticSearch({ namespace: ns }, draw(), {}, 1);
  await a.vectors.loading(ns);
  await until("A's copy written", () => a.vectors.snapshots.written === 1);

  // After the snapshot: a new memory, a deleted one, and a vector from the embedding worker.
  const q = draw();
  const added = Bun.randomUUIDv7();
  await a.apply([create(added, ns, 1, q)], null);
  vectors.set(added, q);
  const gone = ops[5].event === "ADD" ? ops[5].create.id : "";
  await a.apply([{ event: "DELETE", target: gone, reason: "test" }], null);
  vectors.delete(gone);
  const late = Bun.randomUUIDv7();
  await a.apply([create(late, ns, 2, "pending")], null);
  const [pending] = (await a.pendingEmbeddings(10)).filter((p) => p.id === late);
  const near = q.map((x, j) => x + (j === 0 ? 0.01 : 0));
  const nearNorm = Math.hypot(...near);
  const lateV = near.map((x) => x / nearNorm);
  expect(await a.setVectors([{ id: late, updatedAt: pending.updatedAt, vector: lateV }])).toBe(1);
  vectors.set(late, lateV);

  const b = await open();
  await until("B ready", async () => (await b.notReadyReason()) === undefined);
  // Ready: B holds the copy, read from the database, before any search.
  expect(b.vectors.snapshots.read).toBe(1);
  expect(b.vectors.stats()).toEqual({ namespaces: 1, vectors: 1200 - 1 + 2 - 0 });
  const top = await b.semanticSearch({ namespace: ns }, q, {}, 3);
  expect(top.map((h) => h.memory.id).slice(0, 2)).toEqual([added, late]);
  expect(top.map((h) => h.memory.id)).not.toContain(gone);
  for (let i = 0; i < 12; i++) {
    const x = draw();
    const entity = i % 3 === 0 ? "e2" : undefined;
    const got = await answer(b, ns, x, entity);
    expect(got).toEqual(await answer(a, ns, x, entity));
    for (const [id, score] of got) expect(Number(score)).toBeCloseTo(dot(vectors.get(id)!, x), 5);
  }
  expect(b.vectors.snapshots.read).toBe(1);

  // The vectors rebuilt (another epoch): a replica opened now reads no snapshot.
  await a.rebuildSearchIndex({ embeddings: true });
  const c = await open();
  await until("C ready", async () => (await c.notReadyReason()) === undefined);
  expect(c.vectors.snapshots.read).toBe(0);
  expect(await c.semanticSearch({ namespace: ns }, q, {}, 5)).toEqual([]);
}, 120_000);

test("an erasure deletes the namespace's snapshot in its transaction", async () => {
  const a = await open();
  const draw = clustered(61, 32);
  const ns = "snap-erase";
  const ops = Array.from({ length: 300 }, (_, i) => create(Bun.randomUUIDv7(), ns, i, draw()));
  await a.apply(ops, null);
  await a.semanticSearch({ namespace: ns }, draw(), {}, 1);
  await a.vectors.loading(ns);
  await until("A's copy written", () => a.vectors.snapshots.written >= 1);
  const rows = async () =>
    Number((await a.sql`SELECT count(*) AS n FROM search_snapshots WHERE namespace = ${ns}`)[0].n) +
    Number((await a.sql`SELECT count(*) AS n FROM search_snapshot_parts WHERE namespace = ${ns}`)[0].n);
  expect(await rows()).toBeGreaterThan(0);
  await a.erase(ns, "e1", null);
  expect(await rows()).toBe(0);
  // Written again at A's next search (after it followed the erasure), without e1's vectors.
  await until("written again", async () => {
    await a.semanticSearch({ namespace: ns }, draw(), {}, 1);
    return (await rows()) > 0;
  });
  const b = await open();
  await until("B ready", async () => (await b.notReadyReason()) === undefined);
  expect(b.vectors.snapshots.read).toBe(1);
  expect((await b.vectors.ready(ns))?.size).toBe(225);
}, 60_000);

// (17,000 rows: the 4-bit copy's first block, 16,384 rows, is thawed as a view of the sections,
// then written to by the changes, then copied out of them: FourBit.own.)
test.each([700, 17_000])(
  "freeze and thaw (%i rows): the space thawed answers as the one frozen, through later changes",
  (n) => {
    const dims = n > 1000 ? 16 : 40;
    const draw = clustered(67, dims);
    const keeper = new FourBit();
    const original = new VectorSpace((_id, _e, row) => keeper.read(row), keeper);
    for (let i = 0; i < n; i++) original.set(`m${i}`, `e${i % 5}`, draw());
    original.set("odd", "e1", Float32Array.of(1, 0, 0));
    const f = original.freeze()!;
    // Through bytes, as the database holds them.
    const sections = f.sections.map((b) => new Uint8Array(new Uint8Array(b.buffer, b.byteOffset, b.byteLength)));
    const k2 = new FourBit();
    const thawed = VectorSpace.thaw(
      JSON.parse(JSON.stringify(f.header)),
      sections,
      (_id, _e, row) => k2.read(row),
      k2,
    )!;
    expect(thawed.size).toBe(original.size);
    const same = () => {
      for (let i = 0; i < 10; i++) {
        const q = draw();
        const entity = i % 2 ? "e3" : undefined;
        const x = original.nearest(entity, q, 30);
        const y = thawed.nearest(entity, q, 30);
        expect(y.ids).toEqual(x.ids);
        expect(Array.from(y.sims)).toEqual(Array.from(x.sims));
      }
    };
    same();
    const change = (from: number) => {
      for (let i = from; i < from + 400; i++) {
        const v = draw();
        original.set(`n${i}`, `e${i % 7}`, v);
        thawed.set(`n${i}`, `e${i % 7}`, v);
        original.set(`m${i * 2}`, `e${(i * 2) % 5}`, undefined);
        thawed.set(`m${i * 2}`, `e${(i * 2) % 5}`, undefined);
      }
    };
    change(0);
    same();
    k2.own();
    change(400);
    same();
    // Frozen again after the changes (cells grown, rows moved), and thawed: still the same.
    const g = thawed.freeze()!;
    const k3 = new FourBit();
    const bytes = g.sections.map((b) => new Uint8Array(b.buffer as ArrayBuffer, b.byteOffset, b.byteLength));
    const again = VectorSpace.thaw(g.header, bytes, (_id, _e, row) => k3.read(row), k3)!;
    expect(again.size).toBe(original.size);
    const q = draw();
    expect(again.nearest(undefined, q, 30).ids).toEqual(original.nearest(undefined, q, 30).ids);
  },
);

test("an erasure committed while a snapshot is being written: that snapshot is refused, never committed", async () => {
  const a = await open();
  const b = await open(0);
  const draw = clustered(83, 32);
  const ns = "snap-race";
  await a.apply(
    Array.from({ length: 300 }, (_, i) => create(Bun.randomUUIDv7(), ns, i, draw())),
    null,
  );
  // The writer stops after its first part until the erasure has committed.
  const saved = { ...pgSnapshots };
  let release!: () => void;
  const gate = new Promise<void>((r) => {
    release = r;
  });
  let paused = false;
  Object.assign(pgSnapshots, {
    part: 4096,
    between: async () => {
      paused = true;
      await gate;
    },
  });
  try {
    await a.semanticSearch({ namespace: ns }, draw(), {}, 1);
    await until("the write under way", () => paused);
    const { written, refused } = a.vectors.snapshots;
    await b.erase(ns, "e1", null);
    release();
    // Its transaction ends refused: no row, no part, nothing written.
    await until("the write refused", () => a.vectors.snapshots.refused === refused + 1);
    const [rows] = await a.sql`SELECT
        (SELECT count(*) FROM search_snapshots WHERE namespace = ${ns}) +
        (SELECT count(*) FROM search_snapshot_parts WHERE namespace = ${ns}) AS n`;
    expect(Number(rows.n)).toBe(0);
    expect(a.vectors.snapshots.written).toBe(written);
  } finally {
    Object.assign(pgSnapshots, saved);
    release();
  }
}, 60_000);
