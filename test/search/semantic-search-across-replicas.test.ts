// @targets postgres pgbouncer
// Two memd servers (replicas) on one PostgreSQL database, with the fake embedder: semantic search
// on B answers from its in-memory vectors (postgres/vector-cache.ts, sizes made small so the
// approximate path runs on a few dozen memories) and sees in its next request what A committed:
// a store, a correction, a delete, an erasure, and a vector the embedding worker wrote late. A
// hybrid search on B follows A's changes once for its keyword lists and its vectors (follow.ts).
import { afterAll, beforeAll, expect, test } from "bun:test";
import { ann } from "../../src/index/vector/space";
import type { PostgresStorage } from "../../src/storage/postgres/index";
import { pgVectors } from "../../src/storage/postgres/vector-cache";
import { startFakeEmbedder } from "../fake-embedder";
import { startTestServer, type TestServer } from "../helpers";

const embedder = startFakeEmbedder();
const env = { MEMD_EMBED_BASE_URL: embedder.url, MEMD_EMBED_MODEL: "fake-embed", MEMD_EMBED_TIMEOUT_MS: "2000" };
const saved = { ann: { ...ann }, pg: { ...pgVectors } };
let a: TestServer;
let b: TestServer;
beforeAll(async () => {
  Object.assign(ann, { rescore: 16 });
  Object.assign(pgVectors, { exactBelow: 8 });
  a = await startTestServer({ env });
  // The same data dir: the same database (helpers.ts, backendArgs).
  b = await startTestServer({ env, dataDir: a.dataDir });
});
afterAll(async () => {
  Object.assign(ann, saved.ann);
  Object.assign(pgVectors, saved.pg);
  await b.stop();
  await a.stop();
  await embedder.stop();
});

const ns = "replicated";
const words =
  "apple river copper violin desert lantern harbor meadow falcon quartz tundra velvet orchard canyon marble glacier".split(
    " ",
  );
async function store(t: TestServer, content: string, entity = "u"): Promise<string> {
  const r = await t.json("POST", "/v1/memory", { namespace: ns, entity, content, infer: false });
  expect(r.status).toBe(200);
  return r.body.memories[0].id;
}
async function semantic(t: TestServer, query: string, extra: object = {}) {
  const r = await t.json("POST", "/v1/memory/search", { namespace: ns, query, mode: "semantic", limit: 5, ...extra });
  expect(r.status).toBe(200);
  expect(r.body.mode).toBe("semantic");
  return r.body.results as { id: string; content: string; score: number }[];
}

test("a memory stored, corrected, deleted or erased on A is seen so by B's next semantic search", async () => {
  // Forty memories of three words each, over two entities.
  for (let i = 0; i < 40; i++)
    await store(a, `${words[i % 16]} ${words[(i * 3 + 1) % 16]} ${words[(i * 7 + 2) % 16]} note${i}`, `u${i % 2}`);
  // B's first search builds its copy in the background (the exact path answers meanwhile).
  expect((await semantic(b, "apple river")).length).toBe(5);
  const storage = b.server.core.storage as PostgresStorage;
  await storage.vectors.loading(ns);
  expect(await storage.vectors.ready(ns)).toBeDefined();

  const x = await store(a, "zebra saxophone nebula");
  let hits = await semantic(b, "zebra saxophone nebula");
  expect(hits[0].id).toBe(x);
  expect(hits[0].score).toBeCloseTo(1, 5);

  // Corrected on A: B scores the new content, never the old.
  expect((await a.json("PATCH", `/v1/memory/${x}`, { content: "walrus trombone comet" })).status).toBe(200);
  hits = await semantic(b, "zebra saxophone nebula");
  expect(hits.find((h) => h.id === x)?.score ?? 0).toBeLessThan(0.5);
  hits = await semantic(b, "walrus trombone comet");
  expect(hits[0].id).toBe(x);
  expect(hits[0].score).toBeCloseTo(1, 5);

  // Deleted on A: never again on B.
  expect((await a.json("DELETE", `/v1/memory/${x}`)).status).toBe(200);
  expect((await semantic(b, "walrus trombone comet")).map((h) => h.id)).not.toContain(x);

  // An entity erased on A: none of its memories on B.
  const y = await store(a, "gazelle harmonica pulsar", "gone");
  expect((await semantic(b, "gazelle harmonica pulsar"))[0].id).toBe(y);
  const erased = await a.json("POST", "/v1/memory/erase", { namespace: ns, entity: "gone" });
  expect(erased.status).toBe(200);
  expect((await semantic(b, "gazelle harmonica pulsar")).map((h) => h.id)).not.toContain(y);

  // Stored while the embedder is down: A's worker embeds it later, without an audit event; B's
  // next search after that commit finds it.
  embedder.fail(true);
  const z = await store(a, "ibis xylophone quasar");
  embedder.fail(false);
  const deadline = Date.now() + 20_000;
  while ((await a.server.core.storage.pendingEmbeddings(10)).length > 0 && Date.now() < deadline) await Bun.sleep(50);
  expect(await a.server.core.storage.pendingEmbeddings(10)).toEqual([]);
  hits = await semantic(b, "ibis xylophone quasar");
  expect(hits[0].id).toBe(z);
  expect(hits[0].score).toBeCloseTo(1, 5);

  // Every answer of B, approximate, is the exact one (the sizes make the whole namespace a candidate).
  for (const q of ["apple copper", "violin desert lantern", "meadow", "quartz tundra velvet"]) {
    const approx = await semantic(b, q, { entity: "u1" });
    pgVectors.exactBelow = Number.POSITIVE_INFINITY;
    const exact = await semantic(b, q, { entity: "u1" });
    pgVectors.exactBelow = 8;
    expect(approx.map((h) => [h.id, h.score.toFixed(6)])).toEqual(exact.map((h) => [h.id, h.score.toFixed(6)]));
  }
}, 60_000);

test("a hybrid search on B sees A's last change in both halves, with one follow statement for its lists and its vectors", async () => {
  const storage = b.server.core.storage as PostgresStorage;
  const hybrid = async (query: string) => {
    const r = await b.json("POST", "/v1/memory/search", { namespace: ns, query, mode: "hybrid", limit: 5 });
    expect(r.status).toBe(200);
    expect(r.body.mode).toBe("hybrid");
    return r.body.results as { id: string; content: string; score: number }[];
  };
  // B's keyword lists of the namespace are built by its first searches (SQL answers meanwhile).
  for (let i = 0; i < 400 && !storage.keywordLists!.isReady(ns); i++) {
    await hybrid("apple river");
    await Bun.sleep(25);
  }
  expect(storage.keywordLists!.isReady(ns)).toBe(true);
  expect(await storage.vectors.ready(ns)).toBeDefined();

  /** B's hybrid answer to `query` right after a change on A, and the follow statements it sent. */
  const after = async (query: string) => {
    const before = storage.followers.statements;
    const hits = await hybrid(query);
    return {
      top: hits[0] && [hits[0].id, hits[0].content],
      contents: hits.map((h) => h.content),
      ids: hits.map((h) => h.id),
      statements: storage.followers.statements - before,
    };
  };
  const x = await store(a, "yak bassoon aurora");
  expect(await after("yak bassoon aurora")).toMatchObject({ top: [x, "yak bassoon aurora"], statements: 1 });
  // Corrected on A: B's next answer has the new content, and the old one nowhere.
  expect((await a.json("PATCH", `/v1/memory/${x}`, { content: "okapi cello meteor" })).status).toBe(200);
  const corrected = await after("yak bassoon aurora");
  expect(corrected.contents).not.toContain("yak bassoon aurora");
  expect(corrected.statements).toBe(1);
  expect((await after("okapi cello meteor")).top).toEqual([x, "okapi cello meteor"]);
  // Deleted on A: gone from B's next answer.
  expect((await a.json("DELETE", `/v1/memory/${x}`)).status).toBe(200);
  const gone = await after("okapi cello meteor");
  expect(gone.ids).not.toContain(x);
  expect(gone.statements).toBe(1);
}, 60_000);

test("a keyword search on B follows its lists alone; B's next semantic search catches its vectors up to every change on A since", async () => {
  const storage = b.server.core.storage as PostgresStorage;
  expect(await storage.vectors.ready(ns)).toBeDefined();
  const copies = (storage.vectors as unknown as { copies: Map<string, { upto: number }> }).copies;
  const keyword = async (query: string) => {
    const before = storage.followers.statements;
    const r = await b.json("POST", "/v1/memory/search", { namespace: ns, query, mode: "keyword", limit: 5 });
    expect(r.status).toBe(200);
    expect(r.body.mode).toBe("keyword");
    expect(storage.followers.statements - before).toBe(1);
    return (r.body.results as { id: string }[]).map((h) => h.id);
  };
  await semantic(b, "apple");
  const upto = copies.get(ns)!.upto;
  // Changes on A, each in B's next keyword search; the vectors are not followed meanwhile.
  const kept = await store(a, "wombat tuba nebula");
  expect(await keyword("wombat tuba nebula")).toContain(kept);
  const dropped = await store(a, "lynx oboe comet");
  expect(await keyword("lynx oboe comet")).toContain(dropped);
  expect((await a.json("DELETE", `/v1/memory/${dropped}`)).status).toBe(200);
  expect(await keyword("lynx oboe comet")).not.toContain(dropped);
  expect(copies.get(ns)!.upto).toBe(upto);
  // The embedding worker on A has written both vectors (one of a memory since deleted).
  for (let i = 0; i < 200 && !(await semantic(b, "wombat tuba nebula")).some((h) => h.id === kept); i++)
    await Bun.sleep(25);
  const hits = await semantic(b, "wombat tuba nebula");
  expect(hits[0].id).toBe(kept);
  expect((await semantic(b, "lynx oboe comet")).map((h) => h.id)).not.toContain(dropped);
  expect(copies.get(ns)!.upto).toBeGreaterThan(upto);
}, 60_000);
