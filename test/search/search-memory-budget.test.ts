// @targets lmdb postgres binary
// The search-memory budget (--search-memory-mb, src/storage/search-memory.ts), over HTTP on the
// backend under test: with a budget of 1 MiB, smaller than what the namespaces' keyword lists
// hold together, namespaces are released (least recently searched first: /metrics counts them)
// and brought back at their next search, and every answer stays exactly BM25's over the
// namespace's current memories (computed here from what the test stored), including after
// stores and deletes made while a namespace was released. On LMDB small namespaces are held within
// a share of the budget of their own, released past it while the budget has room, and answer as
// before in every mode (keyword checked against BM25, semantic and hybrid against the first pass).
import { afterAll, beforeAll, expect, test } from "bun:test";
import { bm25n, idf, lengthNormOf } from "../../src/text/scoring";
import { queryTerms, termCounts } from "../../src/text/tokens";
import { searchMemoryMetrics, seededRandom, startTestServer, type TestServer, untilEmbedded } from "../helpers";

let t: TestServer;
beforeAll(async () => {
  t = await startTestServer({ args: ["--search-memory-mb", "1"] });
});
afterAll(async () => {
  await t.stop();
});

type Doc = { id: string; content: string };
const docs = new Map<string, Doc[]>();
const rand = seededRandom(32);
// Many distinct words, so that a namespace's lists are many (and the budget is passed).
const word = () => `w${Math.floor(rand() * 4000).toString(36)}`;
const sentence = () => Array.from({ length: 6 + Math.floor(rand() * 6) }, word).join(" ");

async function store(ns: string, content: string) {
  const r = await t.json("POST", "/v1/memory", { namespace: ns, entity: "e", content, infer: false });
  expect(r.status).toBe(200);
  docs.get(ns)!.push({ id: r.body.memories[0].id, content });
}

/**
 * BM25 over the namespace's current memories, as a namespace-wide search must score them, with the
 * namespace's b (the spread of its lengths; adjacent hits are ranked within an entity only).
 */
function expected(ns: string, query: string): Map<string, number> {
  const ds = docs.get(ns)!.map((d) => ({ id: d.id, ...termCounts(d.content) }));
  const norm = lengthNormOf(ds.map((d) => d.length));
  const terms = queryTerms(query);
  const w = terms.map((q) => q.weight * idf(ds.length, ds.filter((d) => d.tf.has(q.term)).length));
  const own = ds.map((d) =>
    terms.reduce((a, q, i) => a + (d.tf.has(q.term) ? bm25n(w[i], d.tf.get(q.term)!, d.length, norm) : 0), 0),
  );
  const out = new Map<string, number>();
  ds.forEach((d, i) => {
    if (own[i] > 0) out.set(d.id, own[i]);
  });
  return out;
}

let searches = 0;
/** One keyword search, checked against BM25 computed here. */
async function searchExactly(ns: string) {
  const own = docs.get(ns)!;
  const pick = () => own[Math.floor(rand() * own.length)].content.split(" ")[0];
  const query = `${pick()} ${pick()} ${word()}`;
  const r = await t.json("POST", "/v1/memory/search", { namespace: ns, query, limit: 100, mode: "keyword" });
  expect(r.status).toBe(200);
  const want = expected(ns, query);
  const got: { id: string; score: number }[] = r.body.results;
  const best = [...want.values()].sort((a, b) => b - a).slice(0, 100);
  expect(got.length).toBe(best.length);
  got.forEach((h, i) => {
    expect(want.has(h.id)).toBe(true);
    expect(Math.abs(h.score - want.get(h.id)!)).toBeLessThan(1e-9);
    expect(Math.abs(h.score - best[i])).toBeLessThan(1e-9);
  });
  searches++;
}

const metrics = () => searchMemoryMetrics(t);

test("over a 1 MiB budget, namespaces are released least recently searched first and every search stays exact", async () => {
  // 10 small namespaces (packed) and 3 of 270 memories (lists: each holds ~0.8 MB).
  const names = [
    ...Array.from({ length: 10 }, (_, i) => `small-${i}`),
    ...Array.from({ length: 3 }, (_, i) => `big-${i}`),
  ];
  for (const ns of names) docs.set(ns, []);
  const jobs = names.flatMap((ns) => Array.from({ length: ns.startsWith("big") ? 270 : 20 }, () => ns));
  for (let i = 0; i < jobs.length; i += 24) await Promise.all(jobs.slice(i, i + 24).map((ns) => store(ns, sentence())));

  const before = await metrics();
  expect(before.budget).toBe(1024 * 1024);
  // Every namespace searched, three times over (on PostgreSQL the lists are built in the
  // background meanwhile, SQL answering: searched until the budget has released some).
  for (let round = 0; round < 40; round++) {
    for (const ns of names) await searchExactly(ns);
    if ((await metrics()).evictions > 0 && round >= 2) break;
    await Bun.sleep(100);
  }
  const after = await metrics();
  expect(after.evictions).toBeGreaterThan(0);
  expect(after.held).toBeGreaterThan(0);
  expect(after.held).toBeLessThanOrEqual(after.budget);
  expect(after.namespaces).toBeLessThan(names.length);

  // Stores and a delete in a namespace released (the least recently searched: the first one),
  // then its search, and every other one again: still exact.
  await store("big-0", sentence());
  const gone = docs.get("big-0")!.shift()!;
  expect((await t.api("DELETE", `/v1/memory/${gone.id}`)).status).toBe(200);
  for (const ns of [...names].reverse()) await searchExactly(ns);
  for (const ns of names) await searchExactly(ns);
  expect((await metrics()).evictions).toBeGreaterThan(after.evictions);
  expect(searches).toBeGreaterThan(3 * names.length);
});

test("on LMDB small namespaces are held within their share of the budget, released past it while the budget has room, and answer exactly in every mode; PostgreSQL has none", async () => {
  await t.stop();
  // 128 MiB: the share is 2 MiB. 120 namespaces of 20 memories of 150 words, ~21 KiB held each
  // with the built-in embedder's vectors.
  t = await startTestServer({ args: ["--search-memory-mb", "128"] });
  const names = Array.from({ length: 120 }, (_, i) => `tenant-${i}`);
  for (const ns of names) docs.set(ns, []);
  const long = () => Array.from({ length: 150 }, word).join(" ");
  const jobs = names.flatMap((ns) => Array.from({ length: 20 }, () => ns));
  for (let i = 0; i < jobs.length; i += 24) await Promise.all(jobs.slice(i, i + 24).map((ns) => store(ns, long())));
  await untilEmbedded(t);
  /** Keyword answers checked against BM25; semantic and hybrid ones returned (ids and scores). */
  const pass = async () => {
    const out = new Map<string, string[]>();
    for (const ns of names) {
      await searchExactly(ns);
      const query = docs.get(ns)![3].content.split(" ").slice(0, 3).join(" ");
      for (const mode of ["semantic", "hybrid"]) {
        const r = await t.json("POST", "/v1/memory/search", { namespace: ns, query, limit: 20, mode });
        expect(r.status).toBe(200);
        expect(r.body.results.length).toBeGreaterThan(0);
        out.set(
          `${ns} ${mode}`,
          r.body.results.map((h: { id: string; score: number }) => `${h.id} ${h.score.toFixed(9)}`),
        );
      }
    }
    return out;
  };
  const reference = await pass();
  const first = await metrics();
  expect(first.budget).toBe(128 * 2 ** 20);
  if (t.databaseUrl === undefined) {
    expect(first.smallBudget).toBe(2 * 2 ** 20);
    expect(first.evictions).toBeGreaterThan(0);
    expect(first.held).toBeGreaterThan(0);
    expect(first.held).toBeLessThanOrEqual(first.smallBudget);
    expect(first.namespaces).toBeLessThan(names.length);
  } else {
    expect(first.smallBudget).toBe(0);
    expect(first.evictions).toBe(0);
  }
  // Searched again, the first ones (released on LMDB) built again: the same answers in every mode
  // (20 vectors a namespace: scored whole, exact cosines).
  expect(await pass()).toEqual(reference);
  const again = await metrics();
  if (t.databaseUrl === undefined) {
    expect(again.evictions).toBeGreaterThan(first.evictions);
    expect(again.held).toBeLessThanOrEqual(again.smallBudget);
  } else expect(again.evictions).toBe(0);
});
