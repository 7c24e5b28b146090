// @targets lmdb
// The optional reranker (src/search/rerank.ts) over real HTTP, with a fake reranker speaking the
// shared protocol (test/fake-reranker.ts): off by default; when set, search and context follow
// its order and its scores (counted in x-memd-rerank-calls and /metrics); when it fails, hangs past MEMD_RERANK_TIMEOUT_MS or answers
// something else, the search's own order is answered, never an error. (Above the storage: one
// backend is enough.)
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { type FakeReranker, startFakeReranker } from "../fake-reranker";
import { metricIn, startTestServer, type TestServer } from "../helpers";

const ns = "rerank";
// The fake reranker here puts the longest document first; BM25 (length-normalised) the short one.
const memories = [
  "Green tea, tea, more tea: the user talks about tea at length, tea in the morning, tea at noon and tea at night with friends",
  "Likes tea",
  "Drinks coffee at work",
];

let reranker: FakeReranker;
let plain: TestServer;
let withReranker: TestServer;

async function load(t: TestServer) {
  for (const content of memories) {
    const r = await t.json("POST", "/v1/memory", { namespace: ns, entity: "u", content, infer: false });
    expect(r.status).toBe(200);
  }
}

beforeAll(async () => {
  reranker = startFakeReranker((_query, doc) => doc.length / 1000);
  plain = await startTestServer();
  withReranker = await startTestServer({
    env: { MEMD_RERANK_BASE_URL: reranker.url, MEMD_RERANK_MODEL: "fake-rerank", MEMD_RERANK_TIMEOUT_MS: "500" },
  });
  await load(plain);
  await load(withReranker);
});

afterAll(async () => {
  await plain?.stop();
  await withReranker?.stop();
  await reranker?.stop();
});

const search = (t: TestServer) =>
  t.json("POST", "/v1/memory/search", { namespace: ns, entity: "u", query: "tea", mode: "keyword" });
const context = (t: TestServer) => t.json("POST", "/v1/memory/context", { namespace: ns, entity: "u", query: "tea" });

/** The memd_rerank_* counters of a server's /metrics. */
async function rerankCounters(t: TestServer) {
  const text = await (await t.api("GET", "/metrics")).text();
  const of = (name: string) => metricIn(text, name);
  return {
    calls: of("memd_rerank_calls_total"),
    errors: of("memd_rerank_call_errors_total"),
    documents: of("memd_rerank_documents_total"),
    seconds: of("memd_rerank_call_seconds_total"),
  };
}

describe("reranker", () => {
  test("off by default: the search's own order", async () => {
    const r = await search(plain);
    expect(r.status).toBe(200);
    expect(r.body.results.map((m: any) => m.content)).toEqual([memories[1], memories[0]]);
    expect(r.headers.get("x-memd-rerank-calls")).toBeNull();
    expect((await context(plain)).headers.get("x-memd-rerank-calls")).toBeNull();
  });

  test("search and context follow the reranker, with its scores; it gets the model, query, documents and top_n", async () => {
    reranker.fail(false);
    const before = reranker.requests.length;
    const counted = await rerankCounters(withReranker);
    const r = await search(withReranker);
    expect(r.status).toBe(200);
    expect(r.body.mode).toBe("keyword");
    expect(r.body.results.map((m: any) => m.content)).toEqual([memories[0], memories[1]]);
    expect(r.body.results[0].score).toBeCloseTo(memories[0].length / 1000, 9);
    const sent = reranker.requests[before];
    expect(sent).toMatchObject({ model: "fake-rerank", query: "tea", top_n: 2 });
    expect([...sent.documents].sort()).toEqual([memories[0], memories[1]].sort());
    const c = await context(withReranker);
    expect(c.status).toBe(200);
    expect(c.body.memories[0].content).toBe(memories[0]);
    expect(reranker.requests.length).toBe(before + 2);
    // Each answer says what it cost, as x-memd-embed-calls does for the embedder.
    expect(r.headers.get("x-memd-rerank-calls")).toBe("1");
    expect(c.headers.get("x-memd-rerank-calls")).toBe("1");
    // On /metrics: two calls, two documents each, none failed.
    const now = await rerankCounters(withReranker);
    expect(now.calls - counted.calls).toBe(2);
    expect(now.documents - counted.documents).toBe(4);
    expect(now.errors).toBe(counted.errors);
    expect(now.seconds).toBeGreaterThan(counted.seconds);
  });

  for (const mode of [true, "hang", "garbage"] as const)
    test(`a reranker that ${mode === true ? "answers 500" : mode === "hang" ? "does not answer in time" : "answers garbage"}: the search's own order`, async () => {
      reranker.fail(mode);
      const counted = await rerankCounters(withReranker);
      try {
        const r = await search(withReranker);
        expect(r.status).toBe(200);
        expect(r.body.results.map((m: any) => m.content)).toEqual([memories[1], memories[0]]);
        expect(r.headers.get("x-memd-rerank-calls")).toBe("1"); // tried, counted
        const c = await context(withReranker);
        expect(c.status).toBe(200);
        expect(c.body.memories[0].content).toBe(memories[1]);
        // Each failure counted on /metrics.
        const now = await rerankCounters(withReranker);
        expect(now.calls - counted.calls).toBe(2);
        expect(now.errors - counted.errors).toBe(2);
      } finally {
        reranker.fail(false);
      }
      await withReranker.settleLogs();
      expect(withReranker.logs.some((l) => l.includes("reranking failed"))).toBe(true);
    });
});
