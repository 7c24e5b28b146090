// @targets lmdb postgres binary
// POST /v1/memory/context over HTTP: the prompt-ready block within a token budget (cl100k_base),
// grouped by category, best first, and its errors.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Tiktoken } from "js-tiktoken/lite";
import cl100k from "js-tiktoken/ranks/cl100k_base";
import { startTestServer, type TestServer } from "../helpers";

const enc = new Tiktoken(cl100k);
const tokens = (s: string) => (s === "" ? 0 : enc.encode(s).length);

let t: TestServer;
beforeAll(async () => {
  // Keyword only (--embedder none), so that the candidates are exactly the memories sharing a word
  // with the query; with the built-in embedder: test/context/default-embedder.test.ts.
  t = await startTestServer({ env: { MEMD_EMBEDDER: "none" } });
});
afterAll(async () => {
  await t.stop();
});

async function store(body: Record<string, unknown>): Promise<string> {
  const r = await t.json("POST", "/v1/memory", { infer: false, ...body });
  expect(r.status).toBe(200);
  return r.body.memories[0].id;
}
const context = (body: Record<string, unknown>, key?: string) =>
  t.json("POST", "/v1/memory/context", body, key ? { key } : undefined);

describe("errors", () => {
  const ok = { namespace: "cx", entity: "u" };
  const cases: [string, Record<string, unknown>, string][] = [
    ["namespace missing", { entity: "u" }, "namespace"],
    ["entity missing", { namespace: "cx" }, "entity"],
    ["entity empty", { ...ok, entity: "" }, "entity"],
    ["query blank", { ...ok, query: "  " }, "query"],
    [
      "query over 1000 characters",
      { ...ok, query: "a".repeat(1001) },
      "query: must be a string of 1 to 1000 characters",
    ],
    ["maxTokens under 50", { ...ok, maxTokens: 49 }, "maxTokens"],
    ["maxTokens over 20000", { ...ok, maxTokens: 20001 }, "maxTokens"],
    ["maxTokens fractional", { ...ok, maxTokens: 100.5 }, "maxTokens"],
    ["maxTokens as a string", { ...ok, maxTokens: "1000" }, "maxTokens"],
    ["categories empty", { ...ok, categories: [] }, "categories"],
    ["categories not an array", { ...ok, categories: "a" }, "categories"],
    ["a category empty", { ...ok, categories: [""] }, "categories"],
    ["an unknown field", { ...ok, limit: 5 }, "limit"],
  ];
  for (const [name, body, field] of cases)
    test(`400 when ${name}, naming the field in words`, async () => {
      const r = await context(body);
      expect(r.status).toBe(400);
      expect(r.body.error.code).toBe("invalid_request");
      expect(r.body.error.message).toContain(field);
    });

  test("403 for a namespace the key does not cover; a read key may ask for its own", async () => {
    await store({ namespace: "cx-own", entity: "u", content: "likes green tea" });
    const k = await t.json("POST", "/v1/keys", { name: "reader", permission: "read", namespaces: ["cx-own"] });
    expect(k.status).toBe(201);
    const foreign = await context({ namespace: "cx-other", entity: "u" }, k.body.secret);
    expect(foreign.status).toBe(403);
    expect(foreign.body.error.code).toBe("forbidden");
    const mine = await context({ namespace: "cx-own", entity: "u" }, k.body.secret);
    expect(mine.status).toBe(200);
    expect(mine.body.memories.map((m: any) => m.content)).toEqual(["likes green tea"]);
  });

  test("an entity without memories: an empty context", async () => {
    const r = await context({ namespace: "cx", entity: "nobody", query: "anything" });
    expect(r.status).toBe(200);
    expect(r.body).toEqual({
      context: "",
      memories: [],
      tokens: 0,
      tokenizer: "cl100k_base",
      truncated: false,
      mode: "importance",
    });
  });
});

describe("budget, grouping and order", () => {
  const ns = "cxb";
  const categories = ["preference", "work", "family", "health"];
  const facts: { content: string; category: string; importance: number }[] = [];
  beforeAll(async () => {
    // 60 memories of different lengths, categories and importance, stored one by one (oldest first).
    for (let i = 0; i < 60; i++) {
      const category = categories[i % 4];
      const importance = ((i * 7) % 10) / 10;
      const content =
        `Fact ${i} about ${category}: ${"the quick brown fox jumps over the lazy dog ".repeat(1 + (i % 5))}`.trim();
      facts.push({ content, category, importance });
      await store({ namespace: ns, entity: "u", content, category, importance });
    }
    await store({ namespace: ns, entity: "other", content: "Fact of another entity about preference" });
  });

  test("never over maxTokens, counted as cl100k_base counts the context", async () => {
    for (const maxTokens of [50, 51, 77, 100, 250, 500, 1000, 3000]) {
      for (const query of [undefined, "quick brown fox", "fact about preference"]) {
        const r = await context({ namespace: ns, entity: "u", maxTokens, ...(query ? { query } : {}) });
        expect(r.status).toBe(200);
        expect(r.body.tokens).toBeLessThanOrEqual(maxTokens);
        expect(r.body.tokens).toBe(tokens(r.body.context));
        expect(r.body.memories.length).toBeGreaterThan(0);
        expect(r.body.truncated).toBe(r.body.memories.length < 60);
        // Nothing of another entity.
        expect(r.body.context).not.toContain("another entity");
      }
    }
    // The default budget is 1000; a large one holds every memory.
    const all = await context({ namespace: ns, entity: "u", maxTokens: 20000 });
    expect(all.body).toMatchObject({ truncated: false, mode: "importance" });
    expect(all.body.memories).toHaveLength(60);
    const byDefault = await context({ namespace: ns, entity: "u" });
    expect(byDefault.body.tokens).toBeLessThanOrEqual(1000);
    expect(byDefault.body.tokens).toBeGreaterThan(900);
  });

  test("grouped by category, best group first; each line dated; the memories in the order shown", async () => {
    const r = await context({ namespace: ns, entity: "u", maxTokens: 20000 });
    const text: string = r.body.context;
    const blocks = text.split("\n\n");
    // One heading per category, each followed by its lines.
    expect(blocks.map((b) => b.split("\n")[0])).toEqual(
      [...new Set(r.body.memories.map((m: any) => m.category))].map((c) => `## ${c}`),
    );
    expect(blocks).toHaveLength(4);
    const lines = blocks.flatMap((b) => b.split("\n").slice(1));
    expect(lines).toEqual(r.body.memories.map((m: any) => `- [${m.createdAt.slice(0, 10)}] ${m.content}`));
    // Within a group best first; groups ordered by their best member.
    for (const b of blocks) {
      const cat = b.split("\n")[0].slice(3);
      const scores = r.body.memories.filter((m: any) => m.category === cat).map((m: any) => m.score);
      expect(scores).toEqual([...scores].sort((x: number, y: number) => y - x));
    }
    const bests = blocks.map((b) =>
      Math.max(
        ...r.body.memories.filter((m: any) => m.category === b.split("\n")[0].slice(3)).map((m: any) => m.score),
      ),
    );
    expect(bests).toEqual([...bests].sort((x, y) => y - x));
  });

  test("without a query: the most important first (all stored today, so recency is nearly equal)", async () => {
    const r = await context({ namespace: ns, entity: "u", maxTokens: 200 });
    const top = Math.max(...facts.map((f) => f.importance));
    for (const m of r.body.memories) expect(m.importance).toBe(top);
  });

  test("with a query: the search's best hits; categories narrow it", async () => {
    await store({ namespace: ns, entity: "q", content: "Prefers green tea over coffee", category: "preference" });
    await store({ namespace: ns, entity: "q", content: "Coffee only on Mondays", category: "preference" });
    await store({ namespace: ns, entity: "q", content: "Drinks tea with the team at work", category: "work" });
    await store({ namespace: ns, entity: "q", content: "Has a dog named Max", category: "family", importance: 1 });
    const r = await context({ namespace: ns, entity: "q", query: "green tea" });
    expect(r.body.mode).toBe("keyword");
    // The hits, and placed after the best hit the memory stored next to it that shares a word with
    // it (coffee), scored as that hit: scores never rise down the list. The dog, stored next to the
    // second hit, shares no word with it or the question: no context for it.
    expect(r.body.memories.map((m: any) => m.content)).toEqual([
      "Prefers green tea over coffee",
      "Coffee only on Mondays",
      "Drinks tea with the team at work",
    ]);
    const scores = r.body.memories.map((m: any) => m.score);
    expect(scores).toEqual([...scores].sort((a: number, b: number) => b - a));
    expect(scores[1]).toBe(scores[0]);
    expect(r.body.context).toMatch(
      /^## preference\n- \[\d{4}-\d{2}-\d{2}\] Prefers green tea over coffee\n- \[\d{4}-\d{2}-\d{2}\] Coffee only on Mondays\n\n## work\n- \[\d{4}-\d{2}-\d{2}\] Drinks tea with the team at work$/,
    );
    const onlyWork = await context({ namespace: ns, entity: "q", query: "green tea", categories: ["work", "health"] });
    expect(onlyWork.body.memories.map((m: any) => m.content)).toEqual(["Drinks tea with the team at work"]);
    // A query that finds nothing: the most important and most recent instead.
    const none = await context({ namespace: ns, entity: "q", query: "volcano" });
    expect(none.body.mode).toBe("importance");
    expect(none.body.memories[0].content).toBe("Has a dog named Max");
    const noneWork = await context({ namespace: ns, entity: "q", query: "volcano", categories: ["work"] });
    expect(noneWork.body.memories.map((m: any) => m.content)).toEqual(["Drinks tea with the team at work"]);
  });

  test("a memory longer than the budget is left out, and shorter ones still fill it", async () => {
    await store({ namespace: ns, entity: "long", content: `Very important ${"word ".repeat(200)}`, importance: 1 });
    await store({ namespace: ns, entity: "long", content: "Short and less important", importance: 0.2 });
    const r = await context({ namespace: ns, entity: "long", maxTokens: 60 });
    expect(r.body.memories.map((m: any) => m.content)).toEqual(["Short and less important"]);
    expect(r.body.truncated).toBe(true);
  });

  test("a memory longer than what is left of the budget gets an excerpt: the sentences that hold the query's words", async () => {
    const filler = (n: number) =>
      Array.from({ length: n }, (_, i) => `Step ${i + 1} of the plan is to review the notes and keep going.`).join(" ");
    const long = `${filler(60)} The project uses Flask, SQLAlchemy and Celery for the backend. ${filler(60)}`;
    await store({ namespace: ns, entity: "excerpt", content: long });
    await store({ namespace: ns, entity: "excerpt", content: "Likes hiking on weekends" });
    const r = await context({
      namespace: ns,
      entity: "excerpt",
      query: "which libraries: Flask, SQLAlchemy?",
      maxTokens: 200,
    });
    expect(r.status).toBe(200);
    expect(r.body.tokens).toBeLessThanOrEqual(200);
    expect(r.body.truncated).toBe(true);
    expect(r.body.memories[0].content).toBe(long);
    const shown: string = r.body.context.split("\n")[1];
    expect(shown).toMatch(
      /^- \[\d{4}-\d{2}-\d{2}\] … .*The project uses Flask, SQLAlchemy and Celery for the backend\..* …$/,
    );
    // At most a quarter of the budget (with its date), far less than the memory.
    expect(r.body.tokens).toBeLessThan(200 / 4 + 20);
    // Without a query: the memory's beginning.
    const plain = await context({ namespace: ns, entity: "excerpt", maxTokens: 120 });
    const first: string = plain.body.context.split("\n").find((l: string) => l.includes("Step 1 of the plan")) ?? "";
    expect(first).toMatch(/^- \[\d{4}-\d{2}-\d{2}\] Step 1 of the plan .* …$/);
  });
});
