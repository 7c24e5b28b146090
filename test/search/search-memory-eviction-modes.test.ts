// @targets lmdb postgres binary
// A namespace released by the search-memory budget answers exactly as before (issue 32), in every
// mode and scope: keyword, semantic and hybrid (an embedding endpoint), namespace-wide, for one
// entity and for an entity prefix, and a keyword search as of an instant. (On PostgreSQL a
// semantic search over more than 100 vectors ranks approximate candidates from the replica's
// copy, and reads every vector while that copy is brought back: the two may differ at the cut,
// as docs/search.md says; there semantic and hybrid answers are compared for one entity of fewer.) The budget is given by
// its environment variable (MEMD_SEARCH_MEMORY_MB=1: the flag is search-memory-budget.test.ts's),
// smaller than what the namespaces' keyword lists and vectors hold together, so every pass over
// them releases namespaces (least recently searched first) and brings them back at their search.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { startFakeEmbedder } from "../fake-embedder";
import {
  backend,
  searchMemoryMetrics,
  seededRandom,
  startTestServer,
  type TestServer,
  untilEmbedded,
} from "../helpers";

const embedder = startFakeEmbedder({ dimensions: 256 });
let t: TestServer;
beforeAll(async () => {
  t = await startTestServer({
    env: {
      MEMD_SEARCH_MEMORY_MB: "1",
      MEMD_EMBED_BASE_URL: embedder.url,
      MEMD_EMBED_MODEL: "fake-embed",
      MEMD_EMBED_TIMEOUT_MS: "5000",
    },
  });
});
afterAll(async () => {
  await t.stop();
  await embedder.stop();
});

const rand = seededRandom(3201);
// Many distinct words, so that a namespace's lists are large (and the budget is passed).
const word = () => `w${Math.floor(rand() * 3000).toString(36)}`;
const sentence = () => Array.from({ length: 6 + Math.floor(rand() * 6) }, word).join(" ");
const names = ["t-0", "t-1", "t-2", "t-3"];

const metrics = () => searchMemoryMetrics(t);

async function store(ns: string, entity: string, content: string): Promise<string> {
  const r = await t.json("POST", "/v1/memory", { namespace: ns, entity, content, infer: false });
  expect(r.status).toBe(200);
  return r.body.memories[0].id;
}

let before = "";
// Each namespace's queries: words it holds, so that every mode and scope finds something.
const queries = new Map<string, string[]>();

/** Every answer of the namespace, as ids and scores (to 1e-9) in order. */
async function answers(ns: string): Promise<Record<string, string[]>> {
  const out: Record<string, string[]> = {};
  const scopes: [string, Record<string, unknown>][] = [
    ["namespace", {}],
    ["entity", { entity: "b-1" }],
    ["prefix", { entityPrefix: "b-" }],
  ];
  const exact = (mode: string, scope: string) => mode === "keyword" || backend === "lmdb" || scope === "entity";
  for (const query of queries.get(ns)!) {
    const asked: [string, Record<string, unknown>][] = [
      ...["keyword", "semantic", "hybrid"].flatMap((mode) =>
        scopes
          .filter(([scope]) => exact(mode, scope))
          .map(([scope, body]): [string, Record<string, unknown>] => [`${mode} ${scope}`, { mode, ...body }]),
      ),
      // As of an instant (keyword, one entity): the memory deleted since is among its answers.
      ["keyword asOf", { mode: "keyword", entity: "b-2", asOf: before }],
    ];
    for (const [what, body] of asked) {
      const r = await t.json("POST", "/v1/memory/search", { namespace: ns, query, limit: 20, ...body });
      expect({ what, status: r.status }).toEqual({ what, status: 200 });
      expect(r.body.mode).toBe(body.mode);
      out[`${query} | ${what}`] = r.body.results.map(
        (h: { id: string; score: number }) => `${h.id} ${h.score.toFixed(9)}`,
      );
    }
  }
  return out;
}

test("namespaces released by the budget answer exactly as before, in every mode and scope, and come back", async () => {
  const deleted = new Map<string, string>();
  for (const ns of names) {
    const jobs = Array.from({ length: 300 }, (_, i) => ({
      entity: ["a", "a", "b-1", "a", "b-2", "a"][i % 6],
      content: sentence(),
      id: "",
    }));
    for (let i = 0; i < jobs.length; i += 24)
      await Promise.all(jobs.slice(i, i + 24).map(async (j) => (j.id = await store(ns, j.entity, j.content))));
    const [gone, other] = jobs.filter((j) => j.entity === "b-2");
    const one = jobs.find((j) => j.entity === "b-1")!;
    const two = (c: string) => c.split(" ").slice(0, 2).join(" ");
    queries.set(ns, [
      two(gone.content),
      two(other.content),
      two(one.content),
      `${one.content.split(" ")[0]} ${word()}`,
    ]);
    deleted.set(ns, gone.id);
  }
  before = new Date().toISOString();
  await Bun.sleep(5);
  // Changes after that instant: stores, and a delete of a memory an as-of search still finds.
  for (const ns of names) {
    for (let i = 0; i < 5; i++) await store(ns, "b-2", sentence());
    expect((await t.api("DELETE", `/v1/memory/${deleted.get(ns)}`)).status).toBe(200);
  }
  await untilEmbedded(t);
  expect((await metrics()).budget).toBe(1024 * 1024);

  // Searched until the budget has released some (on PostgreSQL the lists and vectors are built in
  // the background meanwhile, SQL answering); the answers of the last pass are the reference.
  let reference = new Map<string, Record<string, string[]>>();
  for (let pass = 0; pass < 40; pass++) {
    reference = new Map();
    for (const ns of names) reference.set(ns, await answers(ns));
    if ((await metrics()).evictions > 0 && pass >= 1) break;
    await Bun.sleep(100);
  }
  const released = await metrics();
  expect(released.evictions).toBeGreaterThan(0);
  expect(released.namespaces).toBeLessThan(names.length);
  expect(released.held).toBeLessThanOrEqual(released.budget);
  // An as-of answer holds the memory deleted since; today's answers do not.
  for (const ns of names) {
    const all = Object.entries(reference.get(ns)!);
    expect(all.some(([k, hits]) => k.endsWith(" asOf") && hits.some((h) => h.startsWith(deleted.get(ns)!)))).toBe(true);
    expect(all.some(([k, hits]) => !k.endsWith(" asOf") && hits.some((h) => h.startsWith(deleted.get(ns)!)))).toBe(
      false,
    );
  }
  // Every mode and scope finds something in every namespace.
  for (const ns of names) {
    const kinds = new Set(Object.keys(reference.get(ns)!).map((k) => k.split(" | ")[1]));
    for (const kind of kinds) {
      const hits = Object.entries(reference.get(ns)!).filter(([k]) => k.endsWith(` | ${kind}`));
      expect({ ns, kind, found: hits.some(([, h]) => h.length > 0) }).toEqual({ ns, kind, found: true });
    }
  }

  // Twice more over every namespace, in the other order and then the same: each one searched had
  // been released since its last search, and answers exactly as before.
  for (const order of [[...names].reverse(), names]) {
    for (const ns of order) expect(await answers(ns)).toEqual(reference.get(ns)!);
  }
  const after = await metrics();
  expect(after.evictions).toBeGreaterThan(released.evictions);
  expect(after.held).toBeLessThanOrEqual(after.budget);
});
