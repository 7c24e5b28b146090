// @targets postgres pgbouncer
// Keyword search on PostgreSQL from each replica's lists in memory (issue 26,
// storage/postgres/keyword-cache.ts): two memd servers on one database, A answering every
// keyword search by SQL (MEMD_PG_KEYWORD_LISTS=false), B from its lists. Every change made on A
// (store, edit, delete, merge and replace, erasure, expiry, import) is in B's very next search,
// and B's answers equal A's (ids, order, scores). In process: the lists build in slices while
// searches still answer, each answer equal to the SQL path's.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { pgFollow } from "../../src/storage/postgres/follow";
import { openPostgres, type PostgresStorage } from "../../src/storage/postgres/index";
import { keywordLists } from "../../src/storage/postgres/keyword-cache";
import type { MemoryOp } from "../../src/storage/storage";
import { NEIGHBOUR_SHARE } from "../../src/text/scoring";
import { queryTerms } from "../../src/text/tokens";
import { type ChatRequest, startFakeModel } from "../fake-model";
import {
  freshDatabase,
  metricIn,
  poolerUrl,
  rootSecret,
  runMemd,
  type ServerProcess,
  seededRandom,
  spawnServer,
  tempDir,
  throughPooler,
} from "../helpers";

const fake = startFakeModel();
const dir = tempDir("memd-pg-lists-");
let url = "";
/** The database itself, not through PgBouncer (memd import takes no --database-pooler). */
let direct = "";
let a: ServerProcess;
let b: ServerProcess;
const ns = "lists";

async function call(s: { url: string }, method: string, path: string, body?: unknown) {
  const res = await fetch(s.url + path, {
    method,
    headers: {
      authorization: `Bearer ${rootSecret}`,
      ...(body === undefined ? {} : { "content-type": "application/json" }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(30_000),
  });
  const text = await res.text();
  const json = res.headers.get("content-type")?.includes("application/json");
  return { status: res.status, body: json && text ? (JSON.parse(text) as any) : undefined, text };
}

const start = (name: string, env: Record<string, string>) =>
  spawnServer(
    [
      "--database-url",
      url,
      ...(poolerUrl() ? ["--database-pooler", "transaction"] : []),
      "--data-dir",
      `${dir.dir}/${name}`,
    ],
    {
      MEMD_API_KEY: rootSecret,
      MEMD_LLM_BASE_URL: fake.url,
      MEMD_LLM_MODEL: "tiny",
      MEMD_LLM_TIMEOUT_MS: "5000",
      ...env,
    },
  );

beforeAll(async () => {
  direct = await freshDatabase();
  url = throughPooler(direct);
  [a, b] = await Promise.all([start("a", { MEMD_PG_KEYWORD_LISTS: "false" }), start("b", {})]);
}, 120_000);

afterAll(async () => {
  for (const s of [a, b]) s?.proc.kill("SIGKILL");
  await Promise.all([a, b].map((s) => s?.proc.exited));
  await fake.stop();
  dir.cleanup();
});

const store = async (content: string, extra: Record<string, unknown> = {}) => {
  const r = await call(a, "POST", "/v1/memory", { namespace: ns, entity: "alice", content, infer: false, ...extra });
  expect(r.status).toBe(200);
  return r.body.memories[0];
};

/** A search's answer as ids and scores (to 9 places: the sums are made in another order). */
async function search(s: ServerProcess, query: string, extra: Record<string, unknown> = {}) {
  const r = await call(s, "POST", "/v1/memory/search", { namespace: ns, query, mode: "keyword", limit: 10, ...extra });
  expect(r.status).toBe(200);
  return (r.body.results as any[]).map((h) => [h.content, Number(h.score).toFixed(9)]);
}

/** B's answer to `query`, checked equal to A's (by SQL); the contents B returns. */
async function onB(query: string, extra: Record<string, unknown> = {}) {
  const got = await search(b, query, extra);
  expect({ query, got }).toEqual({ query, got: await search(a, query, extra) });
  return got.map(([content]) => content);
}

/** Gauge `name` of a server's /metrics. */
async function gauge(s: ServerProcess, name: string): Promise<number> {
  return metricIn((await call(s, "GET", "/metrics")).text, name);
}

/** Waits (bounded) until B holds `n` namespaces' lists, built, asking B to search meanwhile. */
async function builtOnB(n: number) {
  for (let i = 0; i < 600; i++) {
    if ((await gauge(b, "memd_pg_keyword_namespaces")) === n) return;
    await search(b, "tea");
    await Bun.sleep(50);
  }
  throw new Error(`B's lists were not built within 30 s (${await gauge(b, "memd_pg_keyword_namespaces")})`);
}

const answer = (...operations: object[]) => JSON.stringify({ operations });
/** The handle the model was offered for a memory's content. */
function handleOf(r: ChatRequest, content: string): string | undefined {
  const user = String(r.messages.find((m) => m.role === "user")?.content);
  const section = user.split("EXISTING MEMORIES:\n")[1].split("\n\nNEW CONTENT:")[0];
  for (const line of section.split("\n")) {
    const m = /^(m\d+) \[[^\]]*\] (.*)$/.exec(line);
    if (m && m[2] === content) return m[1];
  }
  return undefined;
}

describe("two replicas: A searches by SQL, B from its lists", () => {
  test("B's first search answers by SQL while its lists build; then from them, equal to A's", async () => {
    await store("Alice likes green tea", { tags: ["drink"] });
    await store("Alice drinks tea every morning with milk", { category: "habit" });
    await store("Alice plays the piano", { tags: ["music"] });
    await call(a, "POST", "/v1/memory", { namespace: ns, entity: "bob", content: "Bob likes black tea", infer: false });
    expect(await gauge(b, "memd_pg_keyword_namespaces")).toBe(0);
    expect(await gauge(a, "memd_pg_keyword_namespaces")).toBeNaN(); // A has none: every search by SQL
    expect(await onB("tea")).toHaveLength(3);
    await builtOnB(1);
    expect(await onB("tea")).toHaveLength(3);
    expect(await onB("tea piano morning")).toHaveLength(4);
    expect(await onB("tea", { entity: "alice" })).toHaveLength(2);
    expect(await onB("tea", { tags: ["drink"] })).toEqual(["Alice likes green tea"]);
    expect(await onB("tea", { category: "habit" })).toEqual(["Alice drinks tea every morning with milk"]);
    expect(await onB("tea", { limit: 1 })).toHaveLength(1);
    expect(await onB("nothing matches this")).toEqual([]);
  }, 60_000);

  test("a store, an edit and a delete on A are in B's next search", async () => {
    const m = await store("Carol brews oolong");
    expect(await onB("oolong")).toEqual(["Carol brews oolong"]);
    expect((await call(a, "PATCH", `/v1/memory/${m.id}`, { content: "Carol brews coffee" })).status).toBe(200);
    expect(await onB("oolong")).toEqual([]);
    expect(await onB("coffee")).toEqual(["Carol brews coffee"]);
    expect((await call(a, "DELETE", `/v1/memory/${m.id}`)).status).toBe(200);
    expect(await onB("coffee")).toEqual([]);
  }, 60_000);

  test("a merge and a replace (smart store on A) are in B's next search", async () => {
    await store("Alice lives in Paris");
    fake.reply((req) =>
      answer(
        {
          fact: "Alice likes green tea without sugar",
          decision: "MERGE",
          target: handleOf(req, "Alice likes green tea"),
          mergedContent: "Alice likes sencha without sugar",
        },
        { fact: "Alice lives in Berlin", decision: "REPLACE", target: handleOf(req, "Alice lives in Paris") },
      ),
    );
    const r = await call(a, "POST", "/v1/memory", {
      namespace: ns,
      entity: "alice",
      content: "Alice likes green tea, sencha now; Alice lives in Paris, no, Berlin",
    });
    expect(r.body.memories.map((m: any) => m.event).sort()).toEqual(["MERGE", "REPLACE"]);
    expect(await onB("sencha")).toEqual(["Alice likes sencha without sugar"]);
    expect(await onB("green")).toEqual([]);
    expect(await onB("paris")).toEqual([]);
    expect(await onB("berlin")).toEqual(["Alice lives in Berlin"]);
  }, 60_000);

  test("an expiry: gone from B's search at once, and after the sweeper's delete", async () => {
    const m = await store("Dave eats a kiwi", { ttl: 1 });
    const until = Date.parse(m.expiresAt);
    while (Date.now() <= until + 5) await Bun.sleep(20);
    expect(await onB("kiwi")).toEqual([]);
    // The sweeper's DELETE event (within 2 s of expiry), then B follows it.
    for (let i = 0; i < 200; i++) {
      const e = await call(a, "GET", `/v1/memory/events?namespace=${ns}&entity=alice&limit=5`);
      if ((e.body as any[]).some((x) => x.memoryId === m.id && x.event === "DELETE")) break;
      await Bun.sleep(50);
    }
    expect(await onB("kiwi")).toEqual([]);
  }, 60_000);

  test("an erasure on A is in B's next search", async () => {
    expect(await onB("bob")).toEqual(["Bob likes black tea"]);
    expect((await call(a, "POST", "/v1/memory/erase", { namespace: ns, entity: "bob" })).status).toBe(200);
    expect(await onB("bob")).toEqual([]);
    expect(await onB("black tea")).not.toContain("Bob likes black tea");
  }, 60_000);

  test("an import (memd import, events out of time order): in B's next search, the lists rebuilt", async () => {
    // A memory exported from another namespace, renamed into this one with a new id.
    await call(a, "POST", "/v1/memory", {
      namespace: "elsewhere",
      entity: "erin",
      content: "Erin grows mango",
      infer: false,
    });
    const lines = (await call(a, "GET", "/v1/export?namespace=elsewhere")).text.trim().split("\n");
    const memory = JSON.parse(lines.find((l) => l.includes('"type":"memory"'))!);
    memory.namespace = ns;
    memory.id = `${memory.id.slice(0, 24)}${"0".repeat(12)}`;
    const file = `${dir.dir}/import.jsonl`;
    writeFileSync(file, `${lines[0]}\n${JSON.stringify(memory)}\n`);
    const r = await runMemd(["import", file, "--database-url", direct], {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
    });
    expect({ code: r.code, err: r.err }).toMatchObject({ code: 0 });
    expect(await onB("mango")).toEqual(["Erin grows mango"]);
    await builtOnB(1);
    expect(await onB("mango")).toEqual(["Erin grows mango"]);
    await onB("tea");
  }, 60_000);
});

describe("in process", () => {
  let lists: PostgresStorage;
  let sqlOnly: PostgresStorage;
  beforeAll(async () => {
    const db = throughPooler(await freshDatabase());
    const o = {
      url: db,
      pool: 4,
      pooler: poolerUrl() ? ("transaction" as const) : ("none" as const),
      connectTimeoutMs: 5000,
      statementTimeoutMs: 10000,
    };
    lists = await openPostgres(o);
    sqlOnly = await openPostgres({ ...o, keywordLists: false });
  });
  afterAll(async () => {
    keywordLists.slice = 2000;
    await Promise.all([lists?.close(), sqlOnly?.close()]);
  });

  test("the lists build in slices while searches answer, every answer equal to the SQL path's", async () => {
    const rand = seededRandom(26);
    const words = "tea coffee piano paris berlin sails boat red blue dog cat runs daily vegan".split(" ");
    const pick = () => words[Math.floor(rand() * words.length)];
    const ops: MemoryOp[] = [];
    for (let i = 0; i < 400; i++)
      ops.push({
        event: "ADD",
        create: {
          id: Bun.randomUUIDv7(),
          namespace: "slices",
          entity: `e${i % 7}`,
          content: Array.from({ length: 3 + Math.floor(rand() * 8) }, pick).join(" "),
          category: i % 3 === 0 ? "a" : "b",
          importance: 0.5,
        },
      } satisfies MemoryOp);
    await lists.apply(ops, null, Date.now());
    keywordLists.slice = 7;
    const queries = ["tea", "coffee piano", "red blue dog", "daily vegan runs"];
    /**
     * A search's answer: every hit (limit 1000) as [score to 9 places, id], ordered by those, and
     * the scores of the best 10. (SQL sums a memory's terms in any order, so two memories of the
     * same words may differ in the last bit there and tie otherwise: ties are compared as sets.)
     * Within an entity, adjacent hits lend their share (as the search service asks).
     */
    const answer = async (s: PostgresStorage, q: string, entity?: string) => {
      const scope = { namespace: "slices", entity };
      const share = entity === undefined ? 0 : NEIGHBOUR_SHARE;
      const all = (await s.keywordSearch(scope, queryTerms(q), {}, 1000, undefined, share)).map((h) => [
        h.score.toFixed(9),
        h.memory.id,
      ]);
      const best = (await s.keywordSearch(scope, queryTerms(q), {}, 10, undefined, share)).map((h) =>
        h.score.toFixed(9),
      );
      return { all: all.sort((x, y) => (x[0] !== y[0] ? (x[0] < y[0] ? 1 : -1) : x[1] < y[1] ? -1 : 1)), best };
    };
    let duringBuild = 0;
    for (let i = 0; i < 2000 && !lists.keywordLists!.isReady("slices"); i++) {
      const q = queries[i % queries.length];
      expect(await answer(lists, q)).toEqual(await answer(sqlOnly, q));
      duringBuild++;
    }
    expect(lists.keywordLists!.isReady("slices")).toBe(true);
    expect(duringBuild).toBeGreaterThan(0);
    const alike = async () => {
      for (const q of queries)
        for (const entity of [undefined, "e3"]) {
          const got = await answer(lists, q, entity);
          expect(got.best).toHaveLength(10);
          expect(got).toEqual(await answer(sqlOnly, q, entity));
        }
    };
    await alike();
    // Edits: the lists give an edited memory a new place, the entity's order (ids) keeps it.
    const edited = ops.filter((o) => o.event === "ADD" && o.create.entity === "e3").slice(0, 20);
    await sqlOnly.apply(
      edited.map((o, i) => ({
        event: "UPDATE",
        target: o.event === "ADD" ? o.create.id : "",
        patch: { content: i % 2 ? "tea daily tea" : "coffee piano red blue" },
      })),
      null,
    );
    await alike();
  }, 60_000);

  test("the lists follow another replica's changes in pages; too far behind, they are built again, every answer equal to SQL's", async () => {
    const saved = { ...pgFollow };
    const ns = "paged";
    const ops = (n: number, word: string): MemoryOp[] =>
      Array.from({ length: n }, (_, i) => ({
        event: "ADD",
        create: {
          id: Bun.randomUUIDv7(),
          namespace: ns,
          entity: "e",
          content: `${word} tea ${i}`,
          category: "a",
          importance: 0.5,
        },
      }));
    const hits = async (s: PostgresStorage, q: string) =>
      (await s.keywordSearch({ namespace: ns }, queryTerms(q), {}, 100)).map((h) => h.memory.id).sort();
    await sqlOnly.apply(ops(5, "first"), null);
    for (let i = 0; i < 200 && !lists.keywordLists!.isReady(ns); i++) {
      await hits(lists, "tea");
      await Bun.sleep(10);
    }
    expect(lists.keywordLists!.isReady(ns)).toBe(true);
    Object.assign(pgFollow, { page: 3, pages: 4 });
    // A build ends by catching up alone (follow.ts catchUp): counted, to tell a rebuild.
    const catchUp = lists.followers.catchUp;
    let builds = 0;
    lists.followers.catchUp = (...args) => {
      builds++;
      return catchUp(...args);
    };
    try {
      // 7 stores and a delete, written by the other replica: 4 pages (a full page of 3 leaves
      // the changes of its last time for the next: 2 a page), the most a search waits for.
      const written = ops(7, "second");
      await sqlOnly.apply(written, null);
      const gone = "create" in written[0] ? written[0].create.id : "";
      await sqlOnly.apply([{ event: "DELETE", target: gone, reason: "test" }], null);
      const before = lists.followers.statements;
      const second = await hits(lists, "second");
      expect(lists.followers.statements - before).toBe(4);
      expect(second).toEqual(await hits(sqlOnly, "second"));
      expect(second).toHaveLength(6);
      expect(builds).toBe(0); // (followed, not built again)
      // 20 more: 7 pages behind; dropped and built again, answered by SQL meanwhile.
      await sqlOnly.apply(ops(20, "third"), null);
      expect(await hits(lists, "third")).toEqual(await hits(sqlOnly, "third"));
      expect(await hits(lists, "third")).toHaveLength(20);
      for (let i = 0; i < 200 && !lists.keywordLists!.isReady(ns); i++) {
        expect(await hits(lists, "tea")).toEqual(await hits(sqlOnly, "tea"));
        await Bun.sleep(10);
      }
      expect(lists.keywordLists!.isReady(ns)).toBe(true);
      expect(builds).toBe(1);
      expect(await hits(lists, "tea")).toEqual(await hits(sqlOnly, "tea"));
      expect(await hits(lists, "tea")).toHaveLength(31);
    } finally {
      Object.assign(pgFollow, saved);
      lists.followers.catchUp = catchUp;
    }
  }, 60_000);
});
