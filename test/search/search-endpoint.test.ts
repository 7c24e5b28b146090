// @targets lmdb postgres binary
// POST /v1/memory/search over HTTP, on the backend under test (MEMD_TEST_BACKEND).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { startFakeEmbedder } from "../fake-embedder";
import { startFakeModel } from "../fake-model";
import { startTestServer, type TestServer } from "../helpers";

const embedder = startFakeEmbedder({ similar: [["vegetarian", "meat", "vegan"]] });
const model = startFakeModel();
const embedEnv = { MEMD_EMBED_BASE_URL: embedder.url, MEMD_EMBED_MODEL: "fake-embed", MEMD_EMBED_TIMEOUT_MS: "2000" };

let plain: TestServer;
let withModel: TestServer;
beforeAll(async () => {
  // Keyword only (--embedder none): the built-in embedder's searches are test/search/default-embedder.test.ts's.
  plain = await startTestServer({ env: { MEMD_EMBEDDER: "none" } });
  withModel = await startTestServer({
    env: { ...embedEnv, MEMD_LLM_BASE_URL: model.url, MEMD_LLM_MODEL: "tiny" },
  });
});
afterAll(async () => {
  await plain.stop();
  await withModel.stop();
  await embedder.stop();
  await model.stop();
});

async function store(t: TestServer, body: Record<string, unknown>): Promise<string> {
  const r = await t.json("POST", "/v1/memory", { infer: false, ...body });
  expect(r.status).toBe(200);
  return r.body.memories[0].id;
}
const search = (t: TestServer, body: Record<string, unknown>, key?: string) =>
  t.json("POST", "/v1/memory/search", body, key ? { key } : undefined);
const contents = (r: { body: { results: { content: string }[] } }) => r.body.results.map((x) => x.content);

describe("field rules", () => {
  const ok = { namespace: "v", query: "tea" };
  const cases: [string, Record<string, unknown>, string][] = [
    ["namespace missing", { query: "tea" }, "namespace"],
    ["namespace empty", { namespace: "", query: "tea" }, "namespace"],
    ["namespace with a control character", { namespace: "a\u0001", query: "tea" }, "namespace"],
    ["entity empty", { ...ok, entity: "" }, "entity"],
    ["query missing", { namespace: "v" }, "query"],
    ["query empty", { ...ok, query: "" }, "query"],
    ["query blank", { ...ok, query: "   \n" }, "query"],
    [
      "query over 1000 characters",
      { ...ok, query: "a".repeat(1001) },
      "query: must be a string of 1 to 1000 characters",
    ],
    ["query over 1000 emoji", { ...ok, query: "😀".repeat(1001) }, "query: must be a string of 1 to 1000 characters"],
    ["query not a string", { ...ok, query: 5 }, "query"],
    ["limit 0", { ...ok, limit: 0 }, "limit"],
    ["limit 101", { ...ok, limit: 101 }, "limit"],
    ["limit fractional", { ...ok, limit: 2.5 }, "limit"],
    ["limit as a string", { ...ok, limit: "10" }, "limit"],
    ["mode unknown", { ...ok, mode: "fuzzy" }, "mode"],
    ["semantic without an embedding model", { ...ok, mode: "semantic" }, "MEMD_EMBED_BASE_URL"],
    ["hybrid without an embedding model", { ...ok, mode: "hybrid" }, "MEMD_EMBED_BASE_URL"],
    ["category empty", { ...ok, category: "" }, "category"],
    ["tags not an array", { ...ok, tags: "a" }, "tags"],
    ["tag empty", { ...ok, tags: [""] }, "tags"],
    ["unknown field", { ...ok, sort: "new" }, "sort"],
  ];
  for (const [name, body, word] of cases)
    test(`400: ${name}`, async () => {
      const r = await search(plain, body);
      expect(r.status).toBe(400);
      expect(r.body.error.code).toBe("invalid_request");
      expect(JSON.stringify(r.body.error)).toContain(word);
    });

  test("a query of 1000 characters and limits 1 and 100 are accepted; defaults: keyword, limit 10", async () => {
    // Characters, not UTF-16 units: 1000 emoji are 2000 units.
    const emoji = { ...ok, query: "😀".repeat(1000) };
    for (const body of [{ ...ok, query: "a".repeat(1000) }, emoji, { ...ok, limit: 1 }, { ...ok, limit: 100 }, ok]) {
      const r = await search(plain, body);
      expect(r.status).toBe(200);
      expect(r.body).toEqual({ results: [], mode: "keyword" });
    }
  });
});

describe("scoping and permission", () => {
  test("403 for a namespace the key does not cover; a read key may search its own", async () => {
    await store(plain, { namespace: "own", entity: "u", content: "likes green tea" });
    const k = await plain.json("POST", "/v1/keys", { name: "reader", permission: "read", namespaces: ["own"] });
    expect(k.status).toBe(201);
    const foreign = await search(plain, { namespace: "other", query: "tea" }, k.body.secret);
    expect(foreign.status).toBe(403);
    expect(foreign.body.error.code).toBe("forbidden");
    const mine = await search(plain, { namespace: "own", query: "tea" }, k.body.secret);
    expect(mine.status).toBe(200);
    expect(contents(mine)).toEqual(["likes green tea"]);
    expect((await search(plain, { namespace: "own", query: "tea" }, "memd_wrong")).status).toBe(401);
  });

  test("entity given: nothing from another entity or namespace", async () => {
    await store(plain, { namespace: "sc", entity: "a", content: "drinks coffee daily" });
    await store(plain, { namespace: "sc", entity: "b", content: "drinks coffee at night" });
    await store(plain, { namespace: "sc2", entity: "a", content: "drinks coffee too" });
    const a = await search(plain, { namespace: "sc", entity: "a", query: "coffee" });
    expect(contents(a)).toEqual(["drinks coffee daily"]);
    const all = await search(plain, { namespace: "sc", query: "coffee" });
    expect(contents(all).sort()).toEqual(["drinks coffee at night", "drinks coffee daily"]);
  });
});

describe("keyword search", () => {
  test("ranking of a hand-made set: BM25 order, ties newer first, public shape plus score", async () => {
    const ns = "rank";
    // Each hit stored apart from the others (a memory without the query's words between): hits
    // stored next to each other lend each other a share of their scores (adjacent-hits test below).
    await store(plain, { namespace: ns, entity: "u", content: "The user owns a dog named Rex" });
    await store(plain, { namespace: ns, entity: "u", content: "Allergic to cats" });
    await store(plain, { namespace: ns, entity: "u", content: "Dog food: the dog eats dry dog food twice a day" });
    await store(plain, { namespace: ns, entity: "u", content: "Allergic to pollen" });
    const older = await store(plain, { namespace: ns, entity: "u", content: "Walks the dog daily" });
    await store(plain, { namespace: ns, entity: "u", content: "Allergic to dust" });
    const newer = await store(plain, {
      namespace: ns,
      entity: "u",
      content: "Walks the dog daily",
      tags: ["pets"],
      category: "habit",
    });
    const r = await search(plain, { namespace: ns, query: "dog food" });
    expect(r.status).toBe(200);
    expect(r.body.mode).toBe("keyword");
    expect(contents(r)).toEqual([
      "Dog food: the dog eats dry dog food twice a day",
      "Walks the dog daily",
      "Walks the dog daily",
      "The user owns a dog named Rex",
    ]);
    expect(r.body.results[1].id).toBe(newer);
    expect(r.body.results[2].id).toBe(older);
    const scores = r.body.results.map((x: { score: number }) => x.score);
    expect([...scores].sort((a, b) => b - a)).toEqual(scores);
    expect(r.body.results[1]).toMatchObject({ namespace: ns, entity: "u", category: "habit", tags: ["pets"] });
    expect(r.body.results[1].event).toBeUndefined();
    expect(typeof r.body.results[1].createdAt).toBe("string");
    expect(contents(await search(plain, { namespace: ns, query: "dog", limit: 2 }))).toHaveLength(2);
    expect(contents(await search(plain, { namespace: ns, query: "giraffe" }))).toEqual([]);
  });

  test("adjacent hits: a hit stored next to a strong one gains half its score, on both backends, after an edit too; a memory without the query's words never comes in", async () => {
    const ns = "adjacent";
    const turns = [
      "Melanie: what did you research last week, Caroline?",
      "Caroline: adoption agencies for my family",
      "Caroline: the weather was lovely",
      "Caroline: I painted a lake at sunrise",
      "Melanie: I baked bread",
    ];
    const ids: string[] = [];
    for (const content of turns) ids.push(await store(plain, { namespace: ns, entity: "c", content }));
    // Within an entity (over a whole namespace: BM25 alone). Adjacent means next in the order the
    // memories were stored in (their ids), so an edit of the question leaves it where it was.
    for (const edit of [false, true]) {
      if (edit) {
        turns[0] = "Melanie: what did you research last month, Caroline?";
        expect((await plain.json("PATCH", `/v1/memory/${ids[0]}`, { content: turns[0] })).status).toBe(200);
      }
      const r = await search(plain, { namespace: ns, entity: "c", query: "What did Caroline research?" });
      expect(contents(r)).toEqual([turns[0], turns[1], turns[2], turns[3]]);
      const [first, second, third] = r.body.results.map((x: { score: number }) => x.score);
      // BM25 alone ranks the shortest of the three "Caroline" turns second; the reply to the
      // question gains half the question's score, the others half their best neighbour's.
      expect(second).toBeGreaterThan(third);
      expect(second).toBeGreaterThan(first / 2);
      expect(first).toBeGreaterThan(second);
    }
  });

  test("category and tags filter", async () => {
    const ns = "filter";
    await store(plain, {
      namespace: ns,
      entity: "u",
      content: "tea in the morning",
      category: "habit",
      tags: ["a", "b"],
    });
    await store(plain, { namespace: ns, entity: "u", content: "tea is great", category: "opinion", tags: ["a"] });
    await store(plain, { namespace: ns, entity: "u", content: "tea at night" });
    expect(contents(await search(plain, { namespace: ns, query: "tea", category: "habit" }))).toEqual([
      "tea in the morning",
    ]);
    expect(contents(await search(plain, { namespace: ns, query: "tea", tags: ["a", "b"] }))).toEqual([
      "tea in the morning",
    ]);
    expect(contents(await search(plain, { namespace: ns, query: "tea", tags: ["a"] })).sort()).toEqual([
      "tea in the morning",
      "tea is great",
    ]);
  });

  test("many equal scores: the newest win; a filter that only old ones pass still finds them", async () => {
    // 90 equal scores (more than the candidates a backend may look at first: 4 × limit + 16).
    const ns = "ties";
    const ids: string[] = [];
    for (let i = 0; i < 90; i++)
      ids.push(
        await store(plain, {
          namespace: ns,
          entity: `u${i % 3}`,
          content: "green tea",
          category: i < 5 ? "old" : "new",
        }),
      );
    const ids10 = (r: { body: { results: { id: string }[] } }) => r.body.results.map((x) => x.id);
    // createdAt strictly increases in a namespace, so the newest ten are the last ten stored.
    expect(ids10(await search(plain, { namespace: ns, query: "tea" }))).toEqual(ids.slice(-10).reverse());
    expect(ids10(await search(plain, { namespace: ns, query: "tea", category: "old", limit: 10 }))).toEqual(
      ids.slice(0, 5).reverse(),
    );
  });

  test("case and accents are folded; Chinese and Japanese text without spaces is found", async () => {
    const ns = "i18n";
    await store(plain, { namespace: ns, entity: "u", content: "Loves the Café de Flore in PARIS" });
    await store(plain, { namespace: ns, entity: "u", content: "我喜欢吃北京烤鸭" });
    await store(plain, { namespace: ns, entity: "u", content: "東京に住んでいます" });
    expect(contents(await search(plain, { namespace: ns, query: "cafe paris" }))).toEqual([
      "Loves the Café de Flore in PARIS",
    ]);
    expect(contents(await search(plain, { namespace: ns, query: "CAFÉ" }))).toHaveLength(1);
    expect(contents(await search(plain, { namespace: ns, query: "北京烤鸭" }))).toEqual(["我喜欢吃北京烤鸭"]);
    expect(contents(await search(plain, { namespace: ns, query: "烤鸭" }))).toEqual(["我喜欢吃北京烤鸭"]);
    expect(contents(await search(plain, { namespace: ns, query: "東京" }))).toEqual(["東京に住んでいます"]);
  });

  test("a deleted, replaced or expired memory is never returned, right after the change", async () => {
    const ns = "gone";
    const del = await store(plain, { namespace: ns, entity: "u", content: "zebra one" });
    await store(plain, { namespace: ns, entity: "u", content: "zebra kept" });
    expect(contents(await search(plain, { namespace: ns, query: "zebra" }))).toHaveLength(2);
    expect((await plain.json("DELETE", `/v1/memory/${del}`)).status).toBe(200);
    expect(contents(await search(plain, { namespace: ns, query: "zebra" }))).toEqual(["zebra kept"]);

    await store(plain, { namespace: ns, entity: "u", content: "okapi brief", ttl: 0.3 });
    expect(contents(await search(plain, { namespace: ns, query: "okapi" }))).toEqual(["okapi brief"]);
    await Bun.sleep(350);
    // Right at expiry, whether or not the sweeper has run yet.
    expect(contents(await search(plain, { namespace: ns, query: "okapi" }))).toEqual([]);

    // Replaced, by a smart store whose model decides REPLACE.
    await store(withModel, { namespace: ns, entity: "u", content: "User lives in Paris" });
    model.script([
      (req) => {
        const user = String(req.messages.find((m) => m.role === "user")?.content);
        const handle = /^(m\d+) \[[^\]]*\] User lives in Paris$/m.exec(user)?.[1];
        return JSON.stringify({ operations: [{ fact: "User lives in Berlin", decision: "REPLACE", target: handle }] });
      },
    ]);
    const r = await withModel.json("POST", "/v1/memory", { namespace: ns, entity: "u", content: "I moved to Berlin" });
    expect(r.status).toBe(200);
    expect(r.body.memories[0].event).toBe("REPLACE");
    for (const mode of ["keyword", "hybrid", "semantic"])
      expect(contents(await search(withModel, { namespace: ns, query: "lives paris", mode }))).not.toContain(
        "User lives in Paris",
      );
    expect(contents(await search(withModel, { namespace: ns, query: "lives", mode: "keyword" }))).toEqual([
      "User lives in Berlin",
    ]);
  });
});

describe("with an embedding model", () => {
  test("equal semantic scores: newest first, however many tie (on both backends)", async () => {
    const ns = "semties";
    const ids: string[] = [];
    for (let i = 0; i < 25; i++)
      ids.push(await store(withModel, { namespace: ns, entity: "a", content: "twenty five equal notes" }));
    for (const scope of [{ namespace: ns }, { namespace: ns, entity: "a" }])
      for (const limit of [1, 3]) {
        const r = await search(withModel, { ...scope, query: "twenty five equal notes", mode: "semantic", limit });
        expect(r.body.results.map((m: { id: string }) => m.id)).toEqual(ids.slice(-limit).reverse());
      }
  });

  test("default mode hybrid; semantic finds a paraphrase without a shared word; headers count the call", async () => {
    const ns = "sem";
    const veg = await store(withModel, { namespace: ns, entity: "u", content: "Is vegetarian" });
    await store(withModel, { namespace: ns, entity: "u", content: "Plays the piano" });
    const sem = await search(withModel, { namespace: ns, query: "doesn't eat meat", mode: "semantic" });
    expect(sem.status).toBe(200);
    expect(sem.body.mode).toBe("semantic");
    expect(sem.body.results[0].id).toBe(veg);
    expect(sem.headers.get("x-memd-embed-calls")).toBe("1");
    expect(Number(sem.headers.get("x-memd-embed-tokens"))).toBeGreaterThan(0);
    expect(contents(await search(withModel, { namespace: ns, query: "doesn't eat meat", mode: "keyword" }))).toEqual(
      [],
    );
    const hyb = await search(withModel, { namespace: ns, query: "meat piano" });
    expect(hyb.body.mode).toBe("hybrid");
    expect(contents(hyb).sort()).toEqual(["Is vegetarian", "Plays the piano"]);
    const stored = await withModel.json("POST", "/v1/memory", {
      namespace: ns,
      entity: "u",
      content: "x",
      infer: false,
    });
    expect(stored.headers.get("x-memd-embed-calls")).toBe("1");
  });

  test("smart store offers a paraphrase without a shared word as a candidate", async () => {
    const ns = "smart";
    await store(withModel, { namespace: ns, entity: "u", content: "User is vegetarian" });
    for (let i = 0; i < 30; i++) await store(withModel, { namespace: ns, entity: "u", content: `Other fact ${i}` });
    model.reset();
    model.reply('{"operations":[]}');
    const r = await withModel.json("POST", "/v1/memory", { namespace: ns, entity: "u", content: "Doesn't eat meat" });
    expect(r.status).toBe(200);
    expect(model.calls).toBe(1);
    const prompt = String(model.requests[0].messages.find((m) => m.role === "user")?.content);
    expect(prompt).toContain("User is vegetarian");
    expect(Number(r.headers.get("x-memd-embed-calls"))).toBeGreaterThanOrEqual(1);
  });

  test("endpoint down then back: stores succeed, pending rises and falls to 0, semantic results appear", async () => {
    const ns = "down";
    const pending = async () => {
      const m = await (await withModel.api("GET", "/metrics")).text();
      return Number(/^memd_embed_pending (\d+)$/m.exec(m)?.[1]);
    };
    embedder.fail(true);
    const ids: string[] = [];
    for (const content of ["Owns a sailboat", "Sails every weekend"])
      ids.push(await store(withModel, { namespace: ns, entity: "u", content }));
    embedder.fail("hang");
    ids.push(await store(withModel, { namespace: ns, entity: "u", content: "Keeps the sailboat in Porto" }));
    expect(await pending()).toBeGreaterThanOrEqual(3);
    // Keyword still finds them; semantic cannot embed the query: 503; hybrid falls back to keyword.
    expect(contents(await search(withModel, { namespace: ns, query: "sailboat", mode: "keyword" })).length).toBe(2);
    const sem = await search(withModel, { namespace: ns, query: "sailboat", mode: "semantic" });
    expect(sem.status).toBe(503);
    expect(sem.body.error.code).toBe("embedding_unavailable");
    embedder.fail(true);
    const hyb = await search(withModel, { namespace: ns, query: "sailboat" });
    expect(hyb.status).toBe(200);
    expect(hyb.body.mode).toBe("keyword");
    const metrics = await (await withModel.api("GET", "/metrics")).text();
    expect(Number(/^memd_embed_call_errors_total (\d+)$/m.exec(metrics)?.[1])).toBeGreaterThan(0);

    embedder.fail(false);
    const deadline = Date.now() + 60_000;
    while ((await pending()) > 0 && Date.now() < deadline) await Bun.sleep(100);
    expect(await pending()).toBe(0);
    const back = await search(withModel, { namespace: ns, query: "sailboat", mode: "semantic" });
    expect(back.status).toBe(200);
    expect(back.body.results.map((x: { id: string }) => x.id)).toContain(ids[2]);
    expect(back.body.results.length).toBe(3);
  }, 120_000);
});
