// @targets binary
// The compiled binary on LMDB, semantic search over more vectors than are scored whole
// (ann.rescore, 800): the codes' Hamming ranking and the 4-bit copy (WebAssembly and all) run
// inside the binary, and every score answered is the exact cosine of the memory's embedding.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { ann } from "../../src/index/vector/space";
import { fakeVector, startFakeEmbedder } from "../fake-embedder";
import { rootSecret, type ServerProcess, seededRandom, spawnServer, tempDir } from "../helpers";

const embedder = startFakeEmbedder();
const dir = tempDir("memd-past-exact-");
let s: ServerProcess;
const N = ann.rescore + 400;
const words =
  "amber birch cobalt dune ember fjord garnet heron indigo jasper kelp lotus mango nectar onyx pine quartz river slate tulip".split(
    " ",
  );
const rand = seededRandom(31);
const pick = () => words[Math.floor(rand() * words.length)];
const contents = Array.from({ length: N }, () => `${pick()} ${pick()} ${pick()}`);

const call = async (method: string, path: string, body?: unknown) => {
  const res = await fetch(s.url + path, {
    method,
    headers: { authorization: `Bearer ${rootSecret}`, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(30_000),
  });
  return { status: res.status, text: await res.text() };
};

beforeAll(async () => {
  s = await spawnServer(["--data-dir", dir.dir], {
    MEMD_API_KEY: rootSecret,
    MEMD_EMBED_BASE_URL: embedder.url,
    MEMD_EMBED_MODEL: "fake-embed",
  });
  for (const content of contents) {
    const r = await call("POST", "/v1/memory", { namespace: "big", entity: "e", content, infer: false });
    expect(r.status).toBe(200);
  }
  // Every memory embedded: the worker's queue empty (bounded wait).
  for (let i = 0; ; i++) {
    const m = (await call("GET", "/metrics")).text;
    if (Number(/^memd_embed_pending (\d+)$/m.exec(m)?.[1]) === 0 && /^memd_embed_calls_total [1-9]/m.test(m)) break;
    if (i === 600) throw new Error("the embeddings did not all land within 60 s");
    await Bun.sleep(100);
  }
}, 120_000);
afterAll(async () => {
  s?.proc.kill("SIGKILL");
  await s?.proc.exited;
  await embedder.stop();
  dir.cleanup();
});

const cosine = (a: number[], b: number[]) => {
  let d = 0;
  let na = 0;
  let nb = 0;
  for (let i = 0; i < a.length; i++) {
    d += a[i] * b[i];
    na += a[i] * a[i];
    nb += b[i] * b[i];
  }
  return d / Math.sqrt(na * nb);
};

test(`past ${ann.rescore} vectors the binary answers semantic searches with exact cosines, best first, finding the best`, async () => {
  let bestFound = 0;
  const queries = Array.from({ length: 10 }, () => `${pick()} ${pick()}`);
  for (const query of queries) {
    const r = await call("POST", "/v1/memory/search", { namespace: "big", query, mode: "semantic", limit: 5 });
    expect(r.status).toBe(200);
    const results = JSON.parse(r.text).results as { content: string; score: number }[];
    expect(results.length).toBe(5);
    const q = fakeVector(query);
    for (const m of results) expect(m.score).toBeCloseTo(cosine(q, fakeVector(m.content)), 5);
    for (let i = 1; i < results.length; i++) expect(results[i].score).toBeLessThanOrEqual(results[i - 1].score);
    const best = Math.max(...contents.map((c) => cosine(q, fakeVector(c))));
    if (Math.abs(results[0].score - best) < 1e-6) bestFound++;
  }
  // Approximate, but on this small set the best is found (all 10 when this was written).
  expect(bestFound).toBeGreaterThanOrEqual(8);
});
