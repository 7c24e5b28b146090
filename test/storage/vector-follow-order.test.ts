// @targets lmdb
// The in-memory vectors follow a commit from what it wrote (src/storage/lmdb/index-writer.ts
// IndexWriter.vectorsWritten, touched.ts NamespaceCache.refresh) only while no later commit can
// have changed that memory's vector; otherwise they read LMDB. A cache over a recording source,
// refreshed the way runBatch, write() and the embedding thread's commits do; then through Storage.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { ann } from "../../src/index/vector/space";
import { openLmdb } from "../../src/storage/lmdb/index";
import { NamespaceCache, type Touched, type Written } from "../../src/storage/lmdb/touched";
import { vectorLoading } from "../../src/storage/lmdb/vector-cache";
import type { MemoryOp } from "../../src/storage/storage";
import { tempDir } from "../helpers";
import { addOp, clustered, dot } from "../search/clustered-vectors";

/** A source whose one namespace "ns" is loaded (in two slices); records what it read from LMDB. */
function recorded() {
  const space = new Map<string, string>();
  const log: string[] = [];
  const lmdb = new Map<string, string>();
  const cache = new NamespaceCache<Map<string, string>, string>({
    empty: () => space,
    load: (_s, ns, after) => (after ? undefined : [ns]),
    keep: () => true,
    bytes: () => 0,
    read: ([, , id]) => {
      log.push(`read ${id}`);
      return lmdb.get(id);
    },
    drop: (s, [, , id]) => void s.delete(id),
    put: (s, [, , id], v) => void s.set(id, v),
  });
  return { cache, space, log, lmdb };
}

const key = (id: string, entity = "e"): Touched => ["ns", entity, id];
const wrote = (...w: [Touched, string | undefined][]): Written<string> => new Map(w.map(([k, v]) => [k[2], [k, v]]));

test("what a commit wrote is followed without reading LMDB while no later commit was followed", async () => {
  const { cache, space, log } = recorded();
  await cache.get("ns");
  cache.refresh([key("a")], 1, undefined, wrote([key("a"), "first"]));
  cache.refresh([key("b")], 2, undefined, wrote([key("b"), "second"]));
  // A removal is followed the same way.
  cache.refresh([key("a")], 3, undefined, wrote([key("a"), undefined]));
  expect(log).toEqual([]);
  expect([...space]).toEqual([["b", "second"]]);
});

test("a commit followed after a later commit that changed the memory reads LMDB", async () => {
  const { cache, space, log, lmdb } = recorded();
  await cache.get("ns");
  // Commit 2 changed memory a's vector (written by commit 1) and was followed first.
  lmdb.set("a", "changed");
  cache.refresh([key("a")], 2, undefined, wrote([key("a"), "changed"]));
  cache.refresh([key("a")], 1, undefined, wrote([key("a"), "as stored"]));
  expect(log).toEqual(["read a"]);
  expect(space.get("a")).toBe("changed");
  // A later commit again uses what it wrote.
  lmdb.set("a", "third");
  cache.refresh([key("a")], 3, undefined, wrote([key("a"), "third"]));
  expect(log).toEqual(["read a"]);
});

test("a memory whose vector was written under two keys in one commit is read from LMDB", async () => {
  const { cache, space, log, lmdb } = recorded();
  await cache.get("ns");
  lmdb.set("a", "now");
  cache.refresh([key("a", "e1"), key("a", "e2")], 1, undefined, new Map([["a", null]]));
  expect(log).toEqual(["read a", "read a"]);
  expect(space.get("a")).toBe("now");
});

test("a commit made elsewhere (the embedding thread's) makes every commit of this thread so far read LMDB", async () => {
  const { cache, space, log, lmdb } = recorded();
  await cache.get("ns");
  // Commits 1 and 2 of this thread are not yet followed when the thread's commit (after them,
  // ordered as the newest writer made here: 2) is.
  lmdb.set("a", "from the thread");
  cache.refresh([key("a")], 2);
  cache.refresh([key("a")], 1, undefined, wrote([key("a"), "older"]));
  cache.refresh([key("b")], 2, undefined, wrote([key("b"), "older too"]));
  expect(log).toEqual(["read a", "read a", "read b"]);
  expect(space.get("a")).toBe("from the thread");
  // And after a rebuild (passed): the same.
  cache.passed(5);
  cache.refresh([key("c")], 4, undefined, wrote([key("c"), "before the rebuild"]));
  expect(log.at(-1)).toBe("read c");
  expect(space.has("c")).toBe(false);
});

test("commits followed while the namespace loads are put in its copy from what they wrote once it has loaded", async () => {
  const { cache, space, log, lmdb } = recorded();
  const loading = cache.get("ns");
  cache.refresh([key("a")], 1, undefined, wrote([key("a"), "first"]));
  cache.refresh([key("b")], 2, undefined, wrote([key("b"), "second"]));
  cache.refresh([key("c")], 3, undefined, wrote([key("c"), "third"]));
  cache.refresh([key("c")], 4, undefined, wrote([key("c"), undefined]));
  // Commit 6 changed b and was followed before commit 5, which wrote b too: b is read.
  lmdb.set("b", "sixth");
  cache.refresh([key("b")], 6, undefined, wrote([key("b"), "sixth"]));
  cache.refresh([key("b")], 5, undefined, wrote([key("b"), "fifth"]));
  expect(space.size).toBe(0);
  await loading;
  // (Read once per key touched: b's three.)
  expect(log).toEqual(["read b", "read b", "read b"]);
  expect([...space].sort()).toEqual([
    ["a", "first"],
    ["b", "sixth"],
  ]);
});

const saved = { ...ann };
let storage: Awaited<ReturnType<typeof openLmdb>>;
const tmp = tempDir();
beforeAll(async () => {
  // Codes and 4-bit ranking on a few hundred vectors.
  Object.assign(ann, { rescore: 24, cellsFrom: 300, cells: 16, probe: 1 / 4 });
  storage = await openLmdb(tmp.dir);
});
afterAll(async () => {
  Object.assign(ann, saved);
  await storage.close();
  tmp.cleanup();
});

test("through Storage: applies committed together (one failing, replanned alone) are followed exactly from what they wrote", async () => {
  const dims = 48;
  const draw = clustered(7, dims);
  const ns = "follow-written";
  const vectors = new Map<string, Float32Array>();
  const add = (j: number) => {
    const op = addOp(ns, j, `m${j}`, draw());
    const c = (op as Extract<MemoryOp, { event: "ADD" }>).create;
    return { op, id: c.id, v: c.vector as Float32Array };
  };
  const first = Array.from({ length: 200 }, (_, j) => add(j));
  await storage.apply(
    first.map((a) => a.op),
    null,
  );
  for (const a of first) vectors.set(a.id, a.v);
  // Loaded (and followed from here on).
  await storage.semanticSearch({ namespace: ns }, draw(), {}, 5);
  const q = draw();
  const moved = first[10].id;
  const gone = first[20].id;
  const failed = add(1000);
  const later = Array.from({ length: 100 }, (_, j) => add(200 + j));
  // Sent together: one write transaction, planned again one apply at a time since one throws.
  const results = await Promise.allSettled([
    ...later.slice(0, 50).map((a) => storage.apply([a.op], null)),
    storage.apply([{ event: "MERGE", target: moved, patch: { content: "moved", vector: q } }], null),
    // Stages a vector, then fails (its entity's guard): nothing of it is written, nor followed.
    storage.apply(
      [failed.op, { event: "DELETE", target: first[30].id, reason: "guarded", entityLastEventAtMs: 1 }],
      null,
    ),
    storage.apply([{ event: "DELETE", target: gone, reason: "test" }], null),
    ...later.slice(50).map((a) => storage.apply([a.op], null)),
  ]);
  expect(results.filter((r) => r.status === "rejected").length).toBe(1);
  for (const a of later) vectors.set(a.id, a.v);
  vectors.set(moved, q);
  vectors.delete(gone);
  // The memory given the query's vector comes first (its new vector is what the copy ranks by).
  const hits = await storage.semanticSearch({ namespace: ns }, q, {}, 10);
  expect(hits[0].memory.id).toBe(moved);
  expect(hits[0].score).toBeCloseTo(1, 5);
  // Each memory stored later is found by its own vector, with its exact score; the deleted and
  // the failed ones never.
  for (const a of [...later, first[20], failed]) {
    const top = await storage.semanticSearch({ namespace: ns }, a.v, {}, 3);
    for (const h of top) expect(h.score).toBeCloseTo(dot(vectors.get(h.memory.id)!, a.v), 5);
    const ids = top.map((h) => h.memory.id);
    if (vectors.has(a.id)) expect(ids[0]).toBe(a.id);
    else expect(ids).not.toContain(a.id);
  }
});

test("a first load reads the vectors of the keys its first walk listed, or walks them again past vectorLoading.listedKeys: every vector is in the copy either way", async () => {
  const dims = 48;
  const draw = clustered(9, dims);
  const stored = Array.from({ length: 500 }, () => draw());
  for (const [ns, listed] of [
    ["listed", vectorLoading.listedKeys],
    ["walked", 100],
  ] as const) {
    await storage.apply(
      stored.map((v, j) => addOp(ns, j, `m${j}`, v)),
      null,
    );
    const saved = vectorLoading.listedKeys;
    vectorLoading.listedKeys = listed;
    try {
      // Each memory is found by its own vector (a row missing from the copy would not be).
      for (let j = 0; j < stored.length; j += 5) {
        const [hit] = await storage.semanticSearch({ namespace: ns }, stored[j], {}, 1);
        expect(hit.memory.content).toBe(`m${j}`);
        expect(hit.score).toBeCloseTo(1, 5);
      }
    } finally {
      vectorLoading.listedKeys = saved;
    }
  }
});
