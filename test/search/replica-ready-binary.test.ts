// @targets binary
// Replicas ready at start (issue 32), from outside: the compiled binary on PostgreSQL with an
// embedding endpoint (the fake embedder). Replica A fills a namespace, builds its keyword lists
// and vectors at its searches and writes both to the database (--pg-snapshot-from); more stores
// and a delete follow. Replica B, started afterwards, reads both snapshots before /readyz answers
// 200 and catches up: it holds the namespace's lists and vectors before any search, and its first
// keyword, semantic and hybrid searches answer from them, with what A stored after the snapshots
// and without what A deleted, as A answers. Needs the throwaway PostgreSQL of scripts/with-postgres.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { startFakeEmbedder } from "../fake-embedder";
import { freshDatabase, postgresUrl, rootSecret, type ServerProcess, spawnServer, tempDir } from "../helpers";

const embedder = startFakeEmbedder();
const dir = tempDir("memd-replica-ready-");
const running: ServerProcess[] = [];
let url = "";
const start = async (name: string) => {
  const s = await spawnServer(
    ["--database-url", url, "--data-dir", `${dir.dir}/${name}`, "--pg-snapshot-from", "100"],
    {
      MEMD_API_KEY: rootSecret,
      MEMD_EMBED_BASE_URL: embedder.url,
      MEMD_EMBED_MODEL: "fake-embed",
      MEMD_EMBED_TIMEOUT_MS: "5000",
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

async function call(s: ServerProcess, method: string, path: string, body?: unknown) {
  const res = await fetch(s.url + path, {
    method,
    headers: { authorization: `Bearer ${rootSecret}`, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(30_000),
  });
  const text = await res.text();
  return { status: res.status, text, body: text.startsWith("{") ? JSON.parse(text) : undefined };
}
const metric = async (s: ServerProcess, name: string) =>
  Number(new RegExp(`^${name} (\\S+)$`, "m").exec((await call(s, "GET", "/metrics")).text)?.[1]);
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
const store = async (s: ServerProcess, i: number) => {
  const r = await call(s, "POST", "/v1/memory", {
    namespace: ns,
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
