// POST /v1/memory/context latency for an entity of 1,000 memories (issues 21 and 36: p50 < 5 ms
// without an embedder), one caller, over HTTP: without a query (importance and recency), and
// with a 3-word query, each at the default budget of 1,000 tokens and at 4,000. The query is
// searched by keyword on a server without an embedder (MEMD_EMBEDDER=none, the target's case),
// hybrid with the built-in one (its row says which).
//   bun run bench/context.ts [--embedder none|builtin]   (starts dist/memd on a temp data dir; none by default)
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { seededRandom } from "../test/helpers";

const words =
  "tea coffee morning evening garden dog cat piano guitar painting hiking swimming Lisbon Berlin Tokyo nurse engineer teacher daughter son mother father book film music travel kitchen bicycle car train beach mountain lake".split(
    " ",
  );
const categories = ["preference", "work", "family", "health", "travel", "general"];

export async function contextBench(
  url: string,
  key: string,
  log: (s: string) => void = console.log,
  /** The server's embedder: none (the target's case: keyword search) or builtin (hybrid). */
  embedder: "none" | "builtin" = "none",
) {
  const rand = seededRandom(21);
  const pick = () => words[Math.floor(rand() * words.length)];
  const headers = { authorization: `Bearer ${key}`, "content-type": "application/json" };
  const post = async (path: string, body: unknown): Promise<{ tokens: number; memories: unknown[] }> => {
    const r = await fetch(url + path, { method: "POST", headers, body: JSON.stringify(body) });
    if (r.status !== 200) throw new Error(`${path} answered ${r.status}: ${await r.text()}`);
    return (await r.json()) as { tokens: number; memories: unknown[] };
  };
  let stored = 0;
  await Promise.all(
    Array.from({ length: 8 }, async () => {
      while (stored < 1000) {
        stored++;
        const n = 6 + Math.floor(rand() * 14);
        await post("/v1/memory", {
          namespace: "bench-context",
          entity: "user-1",
          content: `The user ${Array.from({ length: n }, pick).join(" ")}`,
          category: categories[Math.floor(rand() * categories.length)],
          importance: Math.round(rand() * 20) / 20,
          infer: false,
        });
      }
    }),
  );
  const rows: { label: string; p50: number; p99: number; tokens: number; memories: number }[] = [];
  const searched = embedder === "none" ? "keyword" : "hybrid, built-in embedder";
  // Last: a store before each call (not timed), as an agent that stores and then asks does; the
  // entity grows to 1,330 memories.
  for (const [label, extra, storing] of [
    ["no query, maxTokens 1000", {}, false],
    ["no query, maxTokens 4000", { maxTokens: 4000 }, false],
    [`3-word query (${searched}), maxTokens 1000`, { query: "tea garden piano" }, false],
    [`3-word query (${searched}), maxTokens 4000`, { query: "tea garden piano", maxTokens: 4000 }, false],
    ["no query, maxTokens 1000, a store before each", {}, true],
  ] as const) {
    const body = { namespace: "bench-context", entity: "user-1", ...extra };
    let last: { tokens: number; memories: unknown[] } = { tokens: 0, memories: [] };
    for (let i = 0; i < 30; i++) last = await post("/v1/memory/context", body); // warm-up (the tokenizer loads once)
    const ms: number[] = [];
    for (let i = 0; i < 300; i++) {
      if (storing)
        await post("/v1/memory", {
          namespace: "bench-context",
          entity: "user-1",
          content: `The user ${pick()} ${pick()} ${pick()} ${pick()} ${pick()} ${pick()}`,
          infer: false,
        });
      const t0 = performance.now();
      await post("/v1/memory/context", body);
      ms.push(performance.now() - t0);
    }
    ms.sort((a, b) => a - b);
    rows.push({ label, p50: ms[150], p99: ms[297], tokens: last.tokens, memories: last.memories.length });
    log(`context ${label}: p50 ${ms[150].toFixed(2)} ms`);
  }
  return [
    `## Context endpoint (issues 21 and 36), ${embedder === "none" ? "without an embedder" : "with the built-in embedder"}`,
    "",
    `POST /v1/memory/context on an entity of 1,000 memories (6–20 words each, 6 categories), one caller over HTTP, 300 calls after 30 of warm-up (bench/context.ts); the last row stores a memory before each call (not timed). ${embedder === "none" ? "Target: p50 < 5 ms (MEMD_EMBEDDER=none)." : "No target (the query is embedded on each call)."}`,
    "",
    "| request | p50 | p99 | tokens | memories in the context |",
    "| --- | --- | --- | --- | --- |",
    ...rows.map(
      (r) => `| ${r.label} | ${r.p50.toFixed(2)} ms | ${r.p99.toFixed(2)} ms | ${r.tokens} | ${r.memories} |`,
    ),
    "",
  ];
}

if (import.meta.main) {
  const dir = mkdtempSync(join(tmpdir(), "memd-context-bench-"));
  const key = "memd_bench_root_key_0123456789abcdef";
  const port = 13000 + Math.floor(Math.random() * 5000);
  const embedder = process.argv.includes("builtin") ? "builtin" : "none";
  const proc = Bun.spawn([join(import.meta.dir, "../dist/memd"), "serve", "--port", String(port), "--data-dir", dir], {
    env: { PATH: process.env.PATH!, MEMD_API_KEY: key, MEMD_LOG_LEVEL: "warn", MEMD_EMBEDDER: embedder },
    stdout: "ignore",
    stderr: "inherit",
  });
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; ; i++) {
    try {
      if ((await fetch(`${url}/readyz`)).status === 200) break;
    } catch {}
    if (i > 3000) throw new Error("memd never became ready");
    await Bun.sleep(10);
  }
  try {
    console.log((await contextBench(url, key, console.log, embedder)).join("\n"));
  } finally {
    proc.kill("SIGTERM");
    await proc.exited;
    rmSync(dir, { recursive: true, force: true });
  }
}
