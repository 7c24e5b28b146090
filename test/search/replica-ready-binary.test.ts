// @targets binary
// Replicas ready at start (issue 32), from outside: the compiled binary on PostgreSQL with an
// embedding endpoint (the fake embedder). Replica A fills a namespace, builds its keyword lists
// and vectors at its searches and writes both to the database (--pg-snapshot-from); more stores
// and a delete follow. Replica B, started afterwards, reads both snapshots before /readyz answers
// 200 and catches up: it holds the namespace's lists and vectors before any search, and its first
// keyword, semantic and hybrid searches answer from them, with what A stored after the snapshots
// and without what A deleted, as A answers. Needs the throwaway PostgreSQL of scripts/with-postgres.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { SQL } from "bun";
import { call as callUrl } from "../binary-helpers";
import { startFakeEmbedder } from "../fake-embedder";
import {
  freshDatabase,
  metricIn,
  postgresUrl,
  rootSecret,
  runMemd,
  type ServerProcess,
  spawnServer,
  tempDir,
} from "../helpers";

const embedder = startFakeEmbedder();
const dir = tempDir("memd-replica-ready-");
const running: ServerProcess[] = [];
let url = "";
const start = async (name: string, args: string[] = [], env: Record<string, string> = {}, db = url) => {
  const s = await spawnServer(
    ["--database-url", db, "--data-dir", `${dir.dir}/${name}`, "--pg-snapshot-from", "100", ...args],
    {
      MEMD_API_KEY: rootSecret,
      MEMD_EMBED_BASE_URL: embedder.url,
      MEMD_EMBED_MODEL: "fake-embed",
      MEMD_EMBED_TIMEOUT_MS: "5000",
      ...env,
    },
  );
  running.push(s);
  return s;
};
beforeAll(async () => {
  postgresUrl();
  url = await freshDatabase();
}, 60_000);
afterAll(async () => {
  for (const s of running) s.proc.kill("SIGKILL");
  await Promise.all(running.map((s) => s.proc.exited));
  await embedder.stop();
  dir.cleanup();
});

const call = (s: ServerProcess, method: string, path: string, body?: unknown) =>
  callUrl(s.url, rootSecret, method, path, body);
const metric = async (s: ServerProcess, name: string) => metricIn((await call(s, "GET", "/metrics")).body, name);
/** Waits (bounded, 60 s) for `check` to hold. */
async function until(what: string, check: () => Promise<boolean>) {
  const deadline = Date.now() + 60_000;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`not within 60 s: ${what}`);
    await Bun.sleep(50);
  }
}

const ns = "ready";
const words = "amber birch cobalt dune ember fjord garnet heron indigo jasper kelp lotus mango nectar onyx pine".split(
  " ",
);
const contentOf = (i: number) => `${words[i % 16]} ${words[(i * 5 + 3) % 16]} item${i}`;
const store = async (s: ServerProcess, i: number, namespace = ns) => {
  const r = await call(s, "POST", "/v1/memory", {
    namespace,
    entity: `u${i % 3}`,
    content: contentOf(i),
    infer: false,
  });
  expect(r.status).toBe(200);
  return r.body.memories[0].id as string;
};
/** The best hit's content and score (to 9 places) of each mode, for `query`. */
const best = async (s: ServerProcess, query: string) => {
  const out: Record<string, [string, string] | undefined> = {};
  for (const mode of ["keyword", "semantic", "hybrid"]) {
    const r = await call(s, "POST", "/v1/memory/search", { namespace: ns, query, mode, limit: 3 });
    expect(r.status).toBe(200);
    expect(r.body.mode).toBe(mode);
    const h = r.body.results[0];
    out[mode] = h && [h.content, Number(h.score).toFixed(9)];
  }
  return out;
};

test("a replica started later reads the lists and vectors another wrote, before it is ready, caught up", async () => {
  const a = await start("a");
  for (let i = 0; i < 300; i += 20) await Promise.all(Array.from({ length: 20 }, (_, k) => store(a, i + k)));
  await until("A embedded", async () => (await metric(a, "memd_embed_pending")) === 0);
  // A's searches build its copies; past 100 memories it writes them to the database.
  await until("A's snapshots written", async () => {
    await best(a, "amber item1");
    return (
      (await metric(a, "memd_pg_keyword_snapshots_written_total")) >= 1 &&
      (await metric(a, "memd_pg_vector_snapshots_written_total")) >= 1
    );
  });
  // After the snapshots: a store (words of its own), and a delete.
  const late = "zephyr quokka item900";
  expect(
    (await call(a, "POST", "/v1/memory", { namespace: ns, entity: "u9", content: late, infer: false })).status,
  ).toBe(200);
  const gone = (await call(a, "POST", "/v1/memory/search", { namespace: ns, query: "item7", mode: "keyword" })).body
    .results[0];
  expect(gone.content).toBe(contentOf(7));
  expect((await call(a, "DELETE", `/v1/memory/${gone.id}`)).status).toBe(200);
  await until("A embedded", async () => (await metric(a, "memd_embed_pending")) === 0);

  const b = await start("b");
  await until("B ready", async () => (await fetch(`${b.url}/readyz`)).status === 200);
  // Ready: it holds the namespace's lists and vectors, read from the snapshots, before any search.
  expect(await metric(b, "memd_pg_keyword_snapshots_read_total")).toBe(1);
  expect(await metric(b, "memd_pg_vector_snapshots_read_total")).toBe(1);
  expect(await metric(b, "memd_pg_keyword_namespaces")).toBe(1);
  expect(await metric(b, "memd_pg_vector_namespaces")).toBe(1);
  for (const query of ["amber item1", "zephyr quokka item900", "garnet item42", "cobalt dune"]) {
    expect({ query, b: await best(b, query) }).toEqual({ query, b: await best(a, query) });
  }
  // Caught up: the store after the snapshots is found in every mode, the deleted memory in none.
  const found = await best(b, late);
  for (const mode of ["keyword", "semantic", "hybrid"]) expect(found[mode]?.[0]).toBe(late);
  for (const mode of ["keyword", "semantic", "hybrid"]) {
    const r = await call(b, "POST", "/v1/memory/search", { namespace: ns, query: contentOf(7), mode, limit: 20 });
    expect(r.body.results.map((h: { id: string }) => h.id)).not.toContain(gone.id);
  }
  // Answered from what it read: nothing was built since.
  expect(await metric(b, "memd_pg_keyword_snapshots_read_total")).toBe(1);
  expect(await metric(b, "memd_pg_vector_snapshots_read_total")).toBe(1);
  expect(await metric(b, "memd_pg_vector_namespaces")).toBe(1);
}, 120_000);

test("each replica's search-memory budget bounds what it reads at start; a namespace left out reads its snapshot at its first search", async () => {
  // Vectors of 4,096 dimensions: a namespace of 300 holds ~0.6 MiB of 4-bit copies, so that a
  // budget of 1 MiB takes the newest namespace's vectors only (whatever its size).
  const db = await freshDatabase();
  const wide = { MEMD_EMBED_DIMENSIONS: "4096" };
  const a = await start("wide-a", [], wide, db);
  const names = ["p0", "p1", "p2"];
  for (const name of names)
    for (let i = 0; i < 300; i += 20) await Promise.all(Array.from({ length: 20 }, (_, k) => store(a, i + k, name)));
  await until("A embedded", async () => (await metric(a, "memd_embed_pending")) === 0);
  for (const name of names) {
    const r = await call(a, "POST", "/v1/memory/search", { namespace: name, query: "amber item1", mode: "hybrid" });
    expect(r.status).toBe(200);
  }
  await until("A's vector snapshots written", async () => {
    for (const name of names)
      await call(a, "POST", "/v1/memory/search", { namespace: name, query: "kelp", mode: "semantic" });
    return (await metric(a, "memd_pg_vector_snapshots_written_total")) >= names.length;
  });
  // A stops, and its keyword snapshots go (--pg-snapshot-from 100 wrote them too): read at start,
  // a namespace's keyword lists (300 memories: ~0.5 MiB held) would push the budget over and
  // release whichever namespace's vectors were read before them (once in a run under load).
  a.proc.kill("SIGKILL");
  await a.proc.exited;
  const sql = new SQL(db);
  await sql`DELETE FROM search_snapshot_parts WHERE kind = 'keyword'`;
  await sql`DELETE FROM search_snapshots WHERE kind = 'keyword'`;
  const sizes = (await sql`SELECT bytes FROM search_snapshots WHERE kind = 'vector'`).map((r: { bytes: string }) =>
    Number(r.bytes),
  );
  const [{ namespace: newest }] = await sql`SELECT namespace FROM search_snapshots ORDER BY written_at DESC LIMIT 1`;
  await sql.close();
  expect(sizes).toHaveLength(3);
  for (const bytes of sizes) expect(bytes).toBeGreaterThan(2 ** 19);

  const small = await start("wide-small", ["--search-memory-mb", "1"], wide, db);
  const all = await start("wide-all", [], wide, db);
  for (const s of [small, all]) await until("ready", async () => (await fetch(`${s.url}/readyz`)).status === 200);
  expect(await metric(small, "memd_pg_vector_snapshots_read_total")).toBe(1);
  expect(await metric(small, "memd_pg_vector_namespaces")).toBe(1);
  expect(await metric(all, "memd_pg_vector_snapshots_read_total")).toBe(3);
  // The one it holds is the newest namespace's: its first semantic search reads nothing more.
  const first = await call(small, "POST", "/v1/memory/search", { namespace: newest, query: "kelp", mode: "semantic" });
  expect(first.status).toBe(200);
  expect(await metric(small, "memd_pg_vector_snapshots_read_total")).toBe(1);
  // A namespace left out reads its snapshot at its first search (SQL answers meanwhile, the same).
  for (const name of names) {
    const got = await call(small, "POST", "/v1/memory/search", {
      namespace: name,
      query: "garnet item42",
      mode: "keyword",
    });
    const want = await call(all, "POST", "/v1/memory/search", {
      namespace: name,
      query: "garnet item42",
      mode: "keyword",
    });
    expect(got.body.results.map((h: { id: string }) => h.id)).toEqual(
      want.body.results.map((h: { id: string }) => h.id),
    );
    await call(small, "POST", "/v1/memory/search", { namespace: name, query: "garnet item42", mode: "semantic" });
  }
  await until("the others read on their first searches", async () => {
    for (const name of names)
      await call(small, "POST", "/v1/memory/search", { namespace: name, query: "kelp", mode: "semantic" });
    return (await metric(small, "memd_pg_vector_snapshots_read_total")) >= 3;
  });
  // Still within its budget: the namespace searched last held whatever its size, the others released.
  expect(await metric(small, "memd_search_memory_budget_bytes")).toBe(2 ** 20);
  expect(await metric(small, "memd_search_memory_evictions_total")).toBeGreaterThan(0);
}, 120_000);

test("a snapshot left from before an import is not read at start, nor its copy built before ready: built at the first search, then written again", async () => {
  const keywordOnly = { MEMD_EMBEDDER: "none", MEMD_EMBED_BASE_URL: "" };
  // Older memories of namespace x elsewhere, exported: importing them moves x's epoch.
  const srcDb = await freshDatabase();
  const src = await start("import-src", [], keywordOnly, srcDb);
  for (let i = 0; i < 30; i++) {
    const r = await call(src, "POST", "/v1/memory", {
      namespace: "x",
      entity: "old",
      content: `older tea ${i}`,
      infer: false,
    });
    expect(r.status).toBe(200);
  }
  const file = `${dir.dir}/older.jsonl`;
  const exported = await runMemd(["export", "--database-url", srcDb, "--out", file], process.env);
  expect(exported.code).toBe(0);

  const db = await freshDatabase();
  const a = await start("import-a", [], keywordOnly, db);
  for (let i = 0; i < 150; i += 30)
    await Promise.all(
      Array.from({ length: 30 }, (_, k) =>
        call(a, "POST", "/v1/memory", { namespace: "x", entity: "new", content: `note ${i + k} tea`, infer: false }),
      ),
    );
  await until("A's snapshot written", async () => {
    await call(a, "POST", "/v1/memory/search", { namespace: "x", query: "tea", mode: "keyword" });
    return (await metric(a, "memd_pg_keyword_snapshots_written_total")) >= 1;
  });
  const imported = await runMemd(["import", "--database-url", db, file], process.env);
  expect({ code: imported.code, err: imported.err.split("\n").at(-2) }).toMatchObject({ code: 0 });

  const b = await start("import-b", [], keywordOnly, db);
  await until("B ready", async () => (await fetch(`${b.url}/readyz`)).status === 200);
  // Ready without reading the older snapshot and without building x's lists.
  expect(await metric(b, "memd_pg_keyword_snapshots_read_total")).toBe(0);
  expect(await metric(b, "memd_pg_keyword_namespaces")).toBe(0);
  const found = await call(b, "POST", "/v1/memory/search", {
    namespace: "x",
    query: "older tea",
    mode: "keyword",
    limit: 3,
  });
  expect(found.body.results.map((h: { content: string }) => h.content.startsWith("older tea"))).toEqual([
    true,
    true,
    true,
  ]);
  // Its first search built the lists (SQL answering meanwhile) and it writes them again.
  await until("B's snapshot written", async () => {
    await call(b, "POST", "/v1/memory/search", { namespace: "x", query: "tea", mode: "keyword" });
    return (await metric(b, "memd_pg_keyword_snapshots_written_total")) >= 1;
  });
  const c = await start("import-c", [], keywordOnly, db);
  await until("C ready", async () => (await fetch(`${c.url}/readyz`)).status === 200);
  expect(await metric(c, "memd_pg_keyword_snapshots_read_total")).toBe(1);
  expect(await metric(c, "memd_pg_keyword_namespaces")).toBe(1);
}, 120_000);
