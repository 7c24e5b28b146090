// @targets lmdb postgres
// MemdStore (client/src/langgraph.ts), LangGraph's BaseStore on memd, against LangGraph's own
// InMemoryStore: the same scenarios run on both and their answers are compared. And what memd adds:
// every put is a keyed fact with its audit event; entityPrefix on list, search and entities.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { type BaseStore, InMemoryStore, type Item } from "@langchain/langgraph-checkpoint";
import { createClient, type MemdClient } from "../../client/src/index";
import { MemdStore } from "../../client/src/langgraph";
import { rootSecret, startTestServer, type TestServer } from "../helpers";

let server: TestServer;
let client: MemdClient;
let run = 0;
beforeAll(async () => {
  // Keyword search (no embedder): hits are exactly the items sharing a word with the query, so
  // the unmatched ones are known (with the built-in embedder every item is a semantic hit).
  server = await startTestServer({ env: { MEMD_EMBEDDER: "none" } });
  client = createClient({ url: server.url, key: rootSecret });
});
afterAll(() => server.stop());

/** A fresh pair: LangGraph's reference and memd's, each in a namespace of its own. */
function pair(): [BaseStore, MemdStore] {
  run += 1;
  return [new InMemoryStore(), new MemdStore(client, { namespace: `lg-${run}` })];
}

/** What an item is, without its times (each store stamps its own). */
const plain = (i: Item | null) => (i === null ? null : { namespace: i.namespace, key: i.key, value: i.value });
const byPlace = (a: { namespace: string[]; key: string }, b: { namespace: string[]; key: string }) =>
  `${a.namespace.join("/")}#${a.key}`.localeCompare(`${b.namespace.join("/")}#${b.key}`);
/** A search answer without scores, in a fixed order (without a query the stores' orders differ: docs/agents.md). */
const unordered = (items: Item[]) => items.map(plain).sort((a, b) => byPlace(a!, b!));

async function both<T>(stores: BaseStore[], f: (s: BaseStore) => Promise<T>): Promise<[T, T]> {
  return [await f(stores[0]), await f(stores[1])];
}

async function seed(s: BaseStore) {
  await s.put(["users", "alice"], "prefs", { theme: "dark", size: 3, profile: { city: "Lisbon" } });
  await s.put(["users", "alice"], "food", { likes: "green tea", size: 1 });
  await s.put(["users", "bob"], "prefs", { theme: "light", size: 5 });
  await s.put(["users", "bob", "work"], "role", { title: "engineer", size: 2 });
  await s.put(["teams", "core"], "charter", { text: "ship memd", size: 4 });
  await s.put(["users", "bobby"], "prefs", { theme: "dark", size: 7 });
}

describe("MemdStore answers as InMemoryStore does", () => {
  test("put, get, overwrite, delete, put null", async () => {
    const stores = pair();
    const [a, b] = await both(stores, async (s) => {
      const out: unknown[] = [];
      await s.put(["docs"], "d1", { text: "first", n: 1, nested: { deep: [1, { x: null }] } });
      out.push(plain(await s.get(["docs"], "d1")));
      await s.put(["docs"], "d1", { text: "second" });
      out.push(plain(await s.get(["docs"], "d1")));
      await s.put(["docs"], "d1", { text: "second" }); // the same again
      out.push(plain(await s.get(["docs"], "d1")));
      await s.delete(["docs"], "d1");
      out.push(plain(await s.get(["docs"], "d1")));
      await s.put(["docs"], "d2", { text: "kept" });
      await s.batch([{ namespace: ["docs"], key: "d2", value: null }]);
      out.push(plain(await s.get(["docs"], "d2")));
      out.push(plain(await s.get(["docs"], "never")));
      await s.delete(["docs"], "never"); // deleting what is not there is no error
      return out;
    });
    expect(b).toEqual(a);
    expect(a[1]).toEqual({ namespace: ["docs"], key: "d1", value: { text: "second" } });
  });

  test("nested namespaces: a prefix finds its own items and those below, not a sibling sharing letters", async () => {
    const stores = pair();
    await both(stores, seed);
    for (const prefix of [["users"], ["users", "bob"], ["users", "alice"], ["teams"], [], ["nobody"]]) {
      const [a, b] = await both(stores, (s) => s.search(prefix, { limit: 50 }));
      expect(b.map(plain)).toEqual(a.map(plain)); // in the same order: namespaces by first put, items by put
    }
    const [a] = await both(stores, (s) => s.search(["users", "bob"], { limit: 50 }));
    expect(a.map((i) => i.namespace.join("/")).sort()).toEqual(["users/bob", "users/bob/work"]);
  });

  test("filters: exact values and operators on a value's fields", async () => {
    const stores = pair();
    await both(stores, seed);
    const filters: Record<string, unknown>[] = [
      { theme: "dark" },
      { theme: "dark", size: 3 },
      { size: { $gt: 2 } },
      { size: { $gte: 2, $lt: 5 } },
      { size: { $in: [1, 7] } },
      { size: { $nin: [1, 7] } },
      { theme: { $ne: "dark" } },
      { profile: { city: "Lisbon" } }, // an object is compared as InMemoryStore compares it (by identity: never)
      { missing: "x" },
    ];
    for (const filter of filters) {
      const [a, b] = await both(stores, (s) => s.search(["users"], { filter, limit: 50 }));
      expect({ filter, items: b.map(plain) }).toEqual({ filter, items: a.map(plain) });
    }
  });

  test("pagination with offset and limit covers every item once", async () => {
    const stores = pair();
    await both(stores, seed);
    const [a, b] = await both(stores, async (s) => {
      const pages: Item[] = [];
      for (let offset = 0; offset < 10; offset += 2) pages.push(...(await s.search([], { limit: 2, offset })));
      return pages;
    });
    expect(b.map(plain)).toEqual(a.map(plain));
    expect(unordered(b).length).toBe(6);
  });

  test("an overwrite keeps an item's place; a delete and a new put moves it last", async () => {
    const stores = pair();
    const [a, b] = await both(stores, async (s) => {
      for (const k of ["a", "b", "c", "d"]) await s.put(["d"], k, { k });
      await s.put(["d"], "b", { k: "b2" });
      await s.delete(["d"], "a");
      await s.put(["d"], "a", { k: "a2" });
      return [await s.search(["d"], { limit: 2 }), await s.search(["d"], { limit: 2, offset: 2 })].map((p) =>
        p.map(plain),
      );
    });
    expect(b).toEqual(a);
  });

  test("index paths as LangGraph reads them: nested, array items, several fields, numbers; a null on the way", async () => {
    const stores = pair();
    const memd = stores[1];
    await both(stores, async (s) => {
      await s.put(["books"], "b1", { chapters: [{ content: "the walrus chapter" }, { content: "ice" }] }, [
        "chapters[*].content",
      ]);
      await s.put(["books"], "b2", { n: 424242, o: { x: "zebu" } }, ["n", "o"]);
      await s.put(["books"], "b3", { profile: null, t: "kept" }, ["profile.city", "t"]);
      await s.put(["books"], "b4", { a: { b: "okapi" }, c: "quagga" }, ["{a.b,c}"]);
    });
    const content = async (key: string) =>
      (await client.getByKey({ namespace: memd.namespace, entity: "books", key }))!.content;
    expect(await content("b1")).toBe("the walrus chapter\nice");
    expect(await content("b2")).toContain("424242");
    expect(await content("b2")).toContain("zebu");
    expect(await content("b3")).toBe("kept");
    expect(await content("b4")).toBe("okapi\nquagga");
    expect((await memd.search(["books"], { query: "walrus" }))[0].key).toBe("b1");
  });

  test('the reserved "langgraph" root: reads answer as InMemoryStore\'s, a put is refused by both', async () => {
    const stores = pair();
    const [a, b] = await both(stores, async (s) => [
      plain(await s.get(["langgraph", "x"], "k")),
      await s.search(["langgraph"]),
      await s.delete(["langgraph", "x"], "k"),
      await s.put(["langgraph"], "k", { v: 1 }).catch((e) => e.name),
    ]);
    expect(b).toEqual(a);
    expect(a[3]).toBe("InvalidNamespaceError");
  });

  test("listNamespaces: prefix, suffix, wildcards, maxDepth, limit and offset", async () => {
    const stores = pair();
    await both(stores, seed);
    const cases = [
      {},
      { prefix: ["users"] },
      { prefix: ["users", "bob"] },
      { suffix: ["prefs"] },
      { suffix: ["work"] },
      { prefix: ["users", "*"], suffix: ["work"] },
      { prefix: ["*", "bob"] },
      { maxDepth: 1 },
      { maxDepth: 2, prefix: ["users"] },
      { limit: 2 },
      { limit: 2, offset: 2 },
      { offset: 10 },
    ];
    for (const options of cases) {
      const [a, b] = await both(stores, (s) => s.listNamespaces(options));
      expect({ options, namespaces: b }).toEqual({ options, namespaces: a });
    }
  });

  test("a batch of mixed operations: reads see the state before its puts, the last put of an item wins", async () => {
    const stores = pair();
    await both(stores, seed);
    const [a, b] = await both(stores, async (s) => {
      const results = await s.batch([
        { namespace: ["users", "alice"], key: "prefs" },
        { namespace: ["users", "carol"], key: "prefs", value: { theme: "blue" } },
        { namespace: ["users", "carol"], key: "prefs" },
        { namespacePrefix: ["users", "carol"], limit: 10, offset: 0 },
        { namespace: ["users", "alice"], key: "food", value: null },
        { namespace: ["users", "carol"], key: "prefs", value: { theme: "green" } },
        { matchConditions: [{ matchType: "prefix", path: ["users"] }], limit: 10, offset: 0 },
      ]);
      const after = [await s.get(["users", "carol"], "prefs"), await s.get(["users", "alice"], "food")];
      return [
        plain(results[0] as Item),
        results[1],
        plain(results[2] as Item | null),
        results[3],
        results[4],
        results[5],
        results[6],
        after.map(plain),
      ];
    });
    expect(b).toEqual(a);
    expect(a[7]).toEqual([{ namespace: ["users", "carol"], key: "prefs", value: { theme: "green" } }, null]);
  });

  test("search with a query ranks what matches it, with a score, in both", async () => {
    const stores = pair();
    await both(stores, seed);
    const memd = stores[1];
    const hits = await memd.search(["users"], { query: "green tea" });
    expect(hits[0]).toMatchObject({
      namespace: ["users", "alice"],
      key: "food",
      value: { likes: "green tea", size: 1 },
    });
    expect(typeof hits[0].score).toBe("number");
    // InMemoryStore without embeddings answers a query unranked; it has the same item among its answers.
    const reference = await stores[0].search(["users"], { query: "green tea", limit: 50 });
    expect(reference.map((i) => i.key)).toContain("food");
    // A query of blanks lists, as none does; a long one is cut to what memd takes, not refused.
    expect((await memd.search(["users"], { query: "   ", limit: 50 })).length).toBe(5);
    expect((await memd.search(["users"], { query: `tea ${"x".repeat(1500)}` }))[0].key).toBe("food");
    // Items the query does not match come after the hits, without a score, as in InMemoryStore.
    const all = await memd.search(["users"], { query: "green tea", limit: 50 });
    expect(all.length).toBe(5);
    expect(all.slice(1).every((i) => i.score === undefined || typeof i.score === "number")).toBe(true);
    // A sibling whose name starts with the prefix's letters never takes the hits' places.
    for (let i = 0; i < 105; i++) await memd.put(["usersX"], `k${i}`, { likes: "green tea, green tea" });
    expect((await memd.search(["users"], { query: "green tea", limit: 3 })).map((h) => h.key)).toContain("food");
    // Only under the prefix: teams' charter is never a hit for users.
    expect((await memd.search(["users"], { query: "ship memd" })).map((h) => h.key)).not.toContain("charter");
    expect((await memd.search(["teams"], { query: "ship memd" })).map((h) => h.key)).toEqual(["charter"]);
  });
});

describe("on memd, every put is an audited keyed fact", () => {
  test("put is a keyed store: ADD, then UPDATE in place; the value is the metadata; delete is a DELETE", async () => {
    const store = new MemdStore(client, { namespace: "lg-audit" });
    await store.put(["u", "1"], "colour", { favourite: "teal" });
    await store.put(["u", "1"], "colour", { favourite: "green" });
    const memory = await client.getByKey({ namespace: "lg-audit", entity: "u.1", key: "colour" });
    expect(memory).toMatchObject({ entity: "u.1", key: "colour", metadata: { favourite: "green" } });
    await store.delete(["u", "1"], "colour");
    const events = await client.events({ memoryId: memory!.id });
    expect(events.map((e) => e.event)).toEqual(["DELETE", "UPDATE", "ADD"]);
    expect(events[1]).toMatchObject({ reason: "keyed store" });
  });

  test("index chooses the searched text: a field, or none (found by its key)", async () => {
    const store = new MemdStore(client, { namespace: "lg-index", index: { fields: ["text"] } });
    await store.put(["docs"], "a", { text: "penguins live in Antarctica", note: "zebra" });
    await store.put(["docs"], "b", { text: "zebras live in Africa" }, ["text"]);
    await store.put(["docs"], "c", { text: "not searched" }, false);
    expect((await client.getByKey({ namespace: "lg-index", entity: "docs", key: "a" }))!.content).toBe(
      "penguins live in Antarctica",
    );
    // The one hit scored first; the others follow unscored, as InMemoryStore answers items it cannot score.
    const hits = await store.search(["docs"], { query: "zebra" });
    expect(hits.map((h) => [h.key, typeof h.score])).toEqual([
      ["b", "number"],
      ["a", "undefined"],
      ["c", "undefined"],
    ]);
    expect((await client.getByKey({ namespace: "lg-index", entity: "docs", key: "c" }))!.content).toBe("c");
  });
});

describe("entityPrefix and prefix: what the store asks of memd", () => {
  beforeAll(async () => {
    for (const [entity, content] of [
      ["acme.alice", "likes sailing"],
      ["acme.bob", "likes sailing too"],
      ["acmecorp.carol", "likes sailing as well"],
      ["other", "likes sailing, also"],
    ])
      await client.store({ namespace: "prefixes", entity, content, infer: false });
  });

  test("GET /v1/memory?entityPrefix= lists only entities starting with it", async () => {
    const page = await client.list({ namespace: "prefixes", entityPrefix: "acme." });
    expect(page.memories.map((m) => m.entity).sort()).toEqual(["acme.alice", "acme.bob"]);
    const wider = await client.list({ namespace: "prefixes", entityPrefix: "acme" });
    expect(wider.memories.length).toBe(3);
    // Pages of one prefix, followed with their cursor, never mix in another entity.
    const first = await client.list({ namespace: "prefixes", entityPrefix: "acme", limit: 2 });
    const rest = await client.list({
      namespace: "prefixes",
      entityPrefix: "acme",
      limit: 2,
      cursor: first.nextCursor!,
    });
    expect([...first.memories, ...rest.memories].map((m) => m.entity).sort()).toEqual([
      "acme.alice",
      "acme.bob",
      "acmecorp.carol",
    ]);
  });

  test("POST /v1/memory/search with entityPrefix ranks within those entities", async () => {
    const { results } = await client.search({ namespace: "prefixes", query: "sailing", entityPrefix: "acme." });
    expect(results.map((r) => r.entity).sort()).toEqual(["acme.alice", "acme.bob"]);
  });

  test("GET /v1/entities?prefix= lists the entities starting with it, paged", async () => {
    const { entities } = await client.entities({ namespace: "prefixes", prefix: "acme" });
    expect(entities.map((e) => e.entity)).toEqual(["acme.alice", "acme.bob", "acmecorp.carol"]);
    const first = await client.entities({ namespace: "prefixes", prefix: "acme", limit: 1 });
    const next = await client.entities({ namespace: "prefixes", prefix: "acme", limit: 5, cursor: first.nextCursor! });
    expect(next.entities.map((e) => e.entity)).toEqual(["acme.bob", "acmecorp.carol"]);
    expect((await client.entities({ namespace: "prefixes", prefix: "zzz" })).entities).toEqual([]);
  });

  test("a bad prefix is a 400 naming the field", async () => {
    const res = await fetch(`${server.url}/v1/memory?namespace=prefixes&entityPrefix=`, {
      headers: { authorization: `Bearer ${rootSecret}` },
    });
    expect(res.status).toBe(400);
    expect(JSON.stringify(await res.json())).toContain("entityPrefix");
  });
});

test("docs/agents.md's LangGraph and Agents SDK sections show their examples as they are", () => {
  const repo = join(import.meta.dir, "../..");
  const whole = readFileSync(join(repo, "docs/agents.md"), "utf8");
  for (const [section, example] of [
    ["## LangGraph", "client/examples/langgraph.test.ts"],
    ["## OpenAI Agents SDK", "client/examples/openai-agents.test.ts"],
  ]) {
    const start = whole.indexOf(`\n${section}\n`);
    expect(start).toBeGreaterThan(0);
    const next = whole.indexOf("\n## ", start + 1);
    const page = whole.slice(start, next === -1 ? undefined : next);
    const blocks = [...page.matchAll(/(<!-- no-run:[^>]*-->\n)?```ts\n([\s\S]*?)```/g)].map((b) => b[2]);
    expect(blocks).toContain(readFileSync(join(repo, example), "utf8"));
  }
});
