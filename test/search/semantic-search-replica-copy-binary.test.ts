// @targets binary
// The compiled binary on PostgreSQL: two replicas (child processes) on one database with the fake
// embedder; B builds its in-memory copy of a namespace of 150 memories (the WebAssembly kernels
// included) on its first semantic search, says so in /metrics, and answers from it what A
// stored and deleted in the very next request. Needs the throwaway PostgreSQL of
// scripts/with-postgres; without it the test fails with the reason.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { startFakeEmbedder } from "../fake-embedder";
import { freshDatabase, postgresUrl, rootSecret, type ServerProcess, spawnServer, tempDir } from "../helpers";

const embedder = startFakeEmbedder();
const dir = tempDir("memd-vector-copy-");
let a: ServerProcess;
let b: ServerProcess;
beforeAll(async () => {
  postgresUrl();
  const url = await freshDatabase();
  const env = {
    MEMD_API_KEY: rootSecret,
    MEMD_EMBED_BASE_URL: embedder.url,
    MEMD_EMBED_MODEL: "fake-embed",
    MEMD_EMBED_TIMEOUT_MS: "2000",
  };
  [a, b] = await Promise.all(
    ["a", "b"].map((n) => spawnServer(["--database-url", url, "--data-dir", `${dir.dir}/${n}`], env)),
  );
}, 60_000);
afterAll(async () => {
  for (const p of [a, b]) p?.proc.kill("SIGKILL");
  await Promise.all([a, b].map((p) => p?.proc.exited));
  await embedder.stop();
  dir.cleanup();
});

async function call(r: ServerProcess, method: string, path: string, body?: unknown) {
  const res = await fetch(r.url + path, {
    method,
    headers: { authorization: `Bearer ${rootSecret}`, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(30_000),
  });
  const text = await res.text();
  return { status: res.status, text, body: text.startsWith("{") ? JSON.parse(text) : undefined };
}
const ns = "copy";
const words = "amber birch cobalt dune ember fjord garnet heron indigo jasper kelp lotus mango nectar onyx pine".split(
  " ",
);
const semantic = async (r: ServerProcess, query: string) => {
  const res = await call(r, "POST", "/v1/memory/search", { namespace: ns, query, mode: "semantic", limit: 5 });
  expect(res.status).toBe(200);
  return res.body.results as { id: string; score: number }[];
};

test("the binary builds a replica's copy of a namespace's vectors and follows the other replica's writes", async () => {
  for (let i = 0; i < 150; i++) {
    const content = `${words[i % 16]} ${words[(i * 5 + 3) % 16]} ${words[(i * 11 + 7) % 16]} item${i}`;
    const r = await call(a, "POST", "/v1/memory", { namespace: ns, entity: `u${i % 3}`, content, infer: false });
    expect(r.status).toBe(200);
  }
  expect((await semantic(b, "amber birch")).length).toBe(5);
  const vectors = async () =>
    Number(/^memd_pg_vector_vectors (\d+)$/m.exec((await call(b, "GET", "/metrics")).text)?.[1] ?? -1);
  const deadline = Date.now() + 20_000;
  while ((await vectors()) < 150 && Date.now() < deadline) await Bun.sleep(50);
  expect(await vectors()).toBe(150);

  const stored = await call(a, "POST", "/v1/memory", {
    namespace: ns,
    entity: "u0",
    content: "quokka sitar aurora",
    infer: false,
  });
  const id = stored.body.memories[0].id as string;
  let hits = await semantic(b, "quokka sitar aurora");
  expect(hits[0].id).toBe(id);
  expect(hits[0].score).toBeCloseTo(1, 5);
  expect(await vectors()).toBe(151);
  expect((await call(a, "DELETE", `/v1/memory/${id}`)).status).toBe(200);
  hits = await semantic(b, "quokka sitar aurora");
  expect(hits.map((h) => h.id)).not.toContain(id);
  expect(await vectors()).toBe(150);
}, 60_000);
