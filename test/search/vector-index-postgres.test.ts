// @targets postgres pgbouncer
// PostgreSQL's in-memory vectors (src/storage/postgres/vector-cache.ts) with their sizes made
// small, through Storage: two storages on one database are two replicas. What one commits (apply
// with its events, the embedding worker's setVectors without any, a delete, a rebuild of the
// vectors) is followed by the other's very next search; every score answered is the exact
// cosine; recall of the approximate path on clustered vectors.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { ann } from "../../src/index/vector/space";
import { pgFollow } from "../../src/storage/postgres/follow";
import { openPostgres, type PostgresStorage } from "../../src/storage/postgres/index";
import { pgVectors } from "../../src/storage/postgres/vector-cache";
import type { MemoryOp } from "../../src/storage/storage";
import { freshDatabase, throughPooler } from "../helpers";
import { clustered, dot } from "./clustered-vectors";

const saved = { ann: { ...ann }, pg: { ...pgVectors }, follow: { ...pgFollow } };
let a: PostgresStorage;
let b: PostgresStorage;
beforeAll(async () => {
  Object.assign(ann, { rescore: 150, cellsFrom: 300, cells: 16, probe: 1 / 4 });
  Object.assign(pgVectors, { exactBelow: 50, slice: 97 });
  const url = throughPooler(await freshDatabase());
  const open = () =>
    openPostgres({
      url,
      pool: 4,
      pooler: process.env.MEMD_TEST_POOLER_URL ? "transaction" : "none",
      connectTimeoutMs: 5000,
      statementTimeoutMs: 10000,
    });
  a = await open();
  b = await open();
}, 60_000);
afterAll(async () => {
  Object.assign(ann, saved.ann);
  Object.assign(pgVectors, saved.pg);
  await Promise.all([a?.close(), b?.close()]);
});

const create = (id: string, ns: string, i: number, vector: Float32Array | "pending"): MemoryOp => ({
  event: "ADD",
  create: { id, namespace: ns, entity: `e${i % 4}`, content: `m${i}`, category: "fact", importance: 0.5, vector },
});

/** Runs a search on `s` that starts building its copy of `ns`, and waits until it is built. */
async function built(s: PostgresStorage, ns: string, q: Float32Array) {
  await s.semanticSearch({ namespace: ns }, q, {}, 1);
  await s.vectors.loading(ns);
  expect(await s.vectors.ready(ns)).toBeDefined();
}

test("a replica follows the other's commits before each search: exact cosines of current memories, recall on clustered vectors", async () => {
  const dims = 64;
  const draw = clustered(31, dims);
  const ns = "pg-ann";
  const vectors = new Map<string, Float32Array>();
  const ops: MemoryOp[] = [];
  for (let i = 0; i < 3000; i++) {
    const id = Bun.randomUUIDv7();
    const v = draw();
    vectors.set(id, v);
    ops.push(create(id, ns, i, v));
  }
  for (let i = 0; i < ops.length; i += 500) await a.apply(ops.slice(i, i + 500), null);
  const q0 = draw();
  await built(b, ns, q0);

  const exact = (q: Float32Array, entity?: string) =>
    [...vectors]
      .filter(
        ([id]) =>
          entity === undefined || ops.some((o) => "create" in o && o.create.id === id && o.create.entity === entity),
      )
      .map(([id, v]) => ({ id, score: dot(v, q) }))
      .sort((x, y) => y.score - x.score)
      .slice(0, 10)
      .map((h) => h.id);
  let hits = 0;
  let want = 0;
  for (let i = 0; i < 20; i++) {
    const q = draw();
    const entity = i % 2 === 0 ? undefined : "e1";
    const got = await b.semanticSearch({ namespace: ns, ...(entity ? { entity } : {}) }, q, {}, 10);
    expect(got.length).toBe(10);
    for (const h of got) {
      expect(h.score).toBeCloseTo(dot(vectors.get(h.memory.id)!, q), 5);
      if (entity) expect(h.memory.entity).toBe(entity);
    }
    const truth = new Set(exact(q, entity));
    hits += got.filter((h) => truth.has(h.memory.id)).length;
    want += 10;
  }
  expect(hits / want).toBeGreaterThanOrEqual(0.9);

  // Nothing changed: b's search checks its copy in the statement reading its hits, no follow
  // statement before it...
  const q = draw();
  let sent = b.followers.statements;
  await b.semanticSearch({ namespace: ns }, q, {}, 5);
  expect(b.followers.statements - sent).toBe(0);
  // ...and a memory stored on a, with the query's own vector, is first on b at once, score 1
  // (the check saw a's commit: b followed it, then searched again).
  const added = Bun.randomUUIDv7();
  await a.apply([create(added, ns, 0, q)], null);
  vectors.set(added, q);
  sent = b.followers.statements;
  let got = await b.semanticSearch({ namespace: ns }, q, {}, 5);
  expect(b.followers.statements - sent).toBe(1);
  expect(got[0].memory.id).toBe(added);
  expect(got[0].score).toBeCloseTo(1, 5);
  // Its vector changed on a: b scores the new one at once.
  const far = q.map((x) => -x);
  await a.apply([{ event: "UPDATE", target: added, patch: { content: "far", vector: far } }], null);
  vectors.set(added, far);
  got = await b.semanticSearch({ namespace: ns }, q, {}, 5);
  expect(got.map((h) => h.memory.id)).not.toContain(added);
  // Deleted on a: never returned by b again.
  const top = got[0].memory.id;
  await a.apply([{ event: "DELETE", target: top, reason: "test" }], null);
  vectors.delete(top);
  got = await b.semanticSearch({ namespace: ns }, q, {}, 5);
  expect(got.map((h) => h.memory.id)).not.toContain(top);
  for (const h of got) expect(h.score).toBeCloseTo(dot(vectors.get(h.memory.id)!, q), 5);

  // The embedding worker's vectors come without an event: stored pending on a, embedded by a,
  // found by b's next search.
  const late = Bun.randomUUIDv7();
  await a.apply([create(late, ns, 1, "pending")], null);
  const [pending] = (await a.pendingEmbeddings(10)).filter((p) => p.id === late);
  expect(await b.semanticSearch({ namespace: ns }, q, {}, 5).then((r) => r.map((h) => h.memory.id))).not.toContain(
    late,
  );
  expect(await a.setVectors([{ id: late, updatedAt: pending.updatedAt, vector: q }])).toBe(1);
  got = await b.semanticSearch({ namespace: ns }, q, {}, 5);
  expect(got[0].memory.id).toBe(late);
  expect(got[0].score).toBeCloseTo(1, 5);

  // Vectors rebuilt on a (memd reindex): b drops its copy; nothing has a vector until embedded again.
  await a.rebuildSearchIndex({ embeddings: true });
  expect(await b.semanticSearch({ namespace: ns }, q, {}, 5)).toEqual([]);
  const again = await a.pendingEmbeddings(10_000);
  expect(again.length).toBe(vectors.size + 1);
}, 60_000);

test("above the exact size, the approximate answer is the exact one on a small set", async () => {
  const dims = 48;
  const draw = clustered(41, dims);
  const ns = "pg-small";
  const ops: MemoryOp[] = [];
  for (let i = 0; i < 120; i++) ops.push(create(Bun.randomUUIDv7(), ns, i, draw()));
  // One memory of its category, its vector away from the others (a filter only it passes).
  const lone = ops[7] as { create: { id: string; category: string; vector: Float32Array } };
  lone.create.category = "preference";
  await a.apply(ops, null);
  await built(b, ns, draw());
  // A filter only one memory passes, the query opposite its vector: read past the 4-bit
  // ranking's best, batch after batch, to the whole scope.
  const away = lone.create.vector.map((x) => -x);
  const few = await b.semanticSearch({ namespace: ns }, away, { category: "preference" }, 5);
  expect(few.map((h) => h.memory.id)).toEqual([lone.create.id]);
  for (let i = 0; i < 10; i++) {
    const q = draw();
    const entity = i % 3 === 0 ? "e2" : undefined;
    const scope = { namespace: ns, ...(entity ? { entity } : {}) };
    const approx = await b.semanticSearch(scope, q, {}, 5);
    pgVectors.exactBelow = Number.POSITIVE_INFINITY;
    const exact = await b.semanticSearch(scope, q, {}, 5);
    pgVectors.exactBelow = 50;
    expect(approx.map((h) => [h.memory.id, h.score.toFixed(6)])).toEqual(
      exact.map((h) => [h.memory.id, h.score.toFixed(6)]),
    );
  }
});

test("a replica follows in pages (a batch of stamped vectors larger than a page included), and one too far behind builds its copy again", async () => {
  const dims = 32;
  const draw = clustered(51, dims);
  const ns = "pg-pages";
  const vectors = new Map<string, Float32Array>();
  const add = async (n: number, vector?: "pending") => {
    const ops: MemoryOp[] = [];
    for (let i = 0; i < n; i++) {
      const id = Bun.randomUUIDv7();
      const v = draw();
      if (!vector) vectors.set(id, v);
      ops.push(create(id, ns, i, vector ?? v));
    }
    await a.apply(ops, null);
    return ops.map((o) => ("create" in o ? o.create.id : ""));
  };
  await add(200);
  await built(b, ns, draw());
  Object.assign(pgFollow, { page: 7, pages: 3 });
  // A build ends by catching up alone (follow.ts catchUp): counted, to tell a rebuild.
  const catchUp = b.followers.catchUp;
  let builds = 0;
  b.followers.catchUp = (...args) => {
    builds++;
    return catchUp(...args);
  };
  try {
    const check = async () => {
      const q = draw();
      const got = await b.semanticSearch({ namespace: ns }, q, {}, 10);
      const truth = [...vectors]
        .map(([id, v]) => ({ id, score: dot(v, q) }))
        .sort((x, y) => y.score - x.score)
        .slice(0, 10);
      expect(got.length).toBe(10);
      for (const h of got) expect(h.score).toBeCloseTo(dot(vectors.get(h.memory.id)!, q), 5);
      // Every memory stored is known to b's copy (or b answered by reading them all).
      const space = await b.vectors.ready(ns);
      if (space) expect(space.size).toBe(vectors.size);
      return { got, truth };
    };
    // 12 new memories: two pages, within the three a search waits for.
    await add(12);
    await check();
    expect(await b.vectors.ready(ns)).toBeDefined();
    expect(builds).toBe(0);
    // 10 vectors embedded late in one batch: one stamp, more memories than a page holds.
    const late = await add(10, "pending");
    const pending = (await a.pendingEmbeddings(10_000)).filter((p) => late.includes(p.id));
    const given = pending.map((p) => ({ id: p.id, updatedAt: p.updatedAt, vector: draw() }));
    expect(await a.setVectors(given)).toBe(10);
    for (const g of given) vectors.set(g.id, g.vector);
    await check();
    expect(await b.vectors.ready(ns)).toBeDefined();
    expect(builds).toBe(0);
    // 40 more and a deletion: more than three pages behind; the copy is built again, and the
    // answers stay exact meanwhile.
    await add(40);
    const [gone] = [...vectors.keys()];
    await a.apply([{ event: "DELETE", target: gone, reason: "test" }], null);
    vectors.delete(gone);
    const { got } = await check();
    expect(got.map((h) => h.memory.id)).not.toContain(gone);
    await b.vectors.loading(ns);
    expect(builds).toBe(1);
    const space = await b.vectors.ready(ns);
    expect(space?.size).toBe(vectors.size);
    await check();
  } finally {
    Object.assign(pgFollow, saved.follow);
    b.followers.catchUp = catchUp;
  }
});
