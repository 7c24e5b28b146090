// The built-in embedder (issue 38): what it finds and what it costs, each against the same run's
// baseline.
// 1. Paraphrases: bench/paraphrase-set.json, [memory, query] pairs written for this bench, no
//    query sharing a word with its memory ("I prefer green tea" / "what does she drink?"). All
//    memories are stored in one entity; each query is an entity-scoped search; figure: the share
//    of queries whose memory is in the top 1 / top 3. Keyword (--embedder none), the built-in
//    embedder (hybrid, the default, and semantic), and USE-lite behind the OpenAI protocol
//    (bench/use-embedder.ts), the teacher the table was distilled from.
// 2. Costs, a server process with the built-in embedder against one with --embedder none: 10,000
//    stores (10 entities of 1,000 template sentences, 8 at a time), then 10,000 searches: CPU of
//    the server per store (its own, the background embedding included), anonymous memory
//    (RssAnon) after, search p50 on an entity of 1,000 memories; and the table's embedding time
//    per text in this process.
//   bun run bench/default-embedder.ts [--no-use] [--no-costs] [--no-paraphrases] [--runs N (pairs of cost runs, default 2)]
//                                     [--stores N (stores, then searches, a cost run; default 10,000)]
import { readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { templateTexts } from "../scripts/distill/corpus";
import { builtinEmbedder } from "../src/embedding/builtin";
import { startTestServer, type TestServer, tempDir } from "../test/helpers";
import { startUseEmbedder } from "./use-embedder";

const root = resolve(import.meta.dir, "..");
const pairs = JSON.parse(readFileSync(join(import.meta.dir, "paraphrase-set.json"), "utf8")) as [string, string][];

export interface ParaphraseRun {
  name: string;
  mode: string;
  top1: number;
  top3: number;
}

async function paraphraseRuns(t: TestServer, name: string, modes: string[]): Promise<ParaphraseRun[]> {
  const namespace = `para-${name}`;
  for (const [content] of pairs) {
    const r = await t.json("POST", "/v1/memory", { namespace, entity: "u", content, infer: false });
    if (r.status !== 200) throw new Error(`store answered ${r.status}`);
  }
  const runs: ParaphraseRun[] = [];
  for (const mode of modes) {
    let top1 = 0;
    let top3 = 0;
    for (const [content, query] of pairs) {
      const r = await t.json("POST", "/v1/memory/search", { namespace, entity: "u", query, mode, limit: 3 });
      if (r.status !== 200) throw new Error(`search answered ${r.status}: ${JSON.stringify(r.body)}`);
      const got = (r.body.results as { content: string }[]).map((m) => m.content);
      if (got[0] === content) top1++;
      if (got.includes(content)) top3++;
    }
    runs.push({ name, mode, top1: top1 / pairs.length, top3: top3 / pairs.length });
  }
  return runs;
}

/** The paraphrase set over keyword, the built-in embedder and (unless `use` is false) USE-lite. */
export async function paraphraseBench(o: { use: boolean; log: (s: string) => void }): Promise<ParaphraseRun[]> {
  const runs: ParaphraseRun[] = [];
  const none = await startTestServer({ env: { MEMD_EMBEDDER: "none", MEMD_LOG_LEVEL: "warn" } });
  try {
    runs.push(...(await paraphraseRuns(none, "none", ["keyword"])));
  } finally {
    await none.stop();
  }
  const builtin = await startTestServer({ env: { MEMD_LOG_LEVEL: "warn" } });
  try {
    runs.push(...(await paraphraseRuns(builtin, "builtin", ["hybrid", "semantic"])));
  } finally {
    await builtin.stop();
  }
  if (o.use) {
    const e = await startUseEmbedder();
    const use = await startTestServer({
      env: {
        MEMD_EMBED_BASE_URL: e.url,
        MEMD_EMBED_MODEL: "use-lite",
        MEMD_EMBED_TIMEOUT_MS: "120000",
        MEMD_LOG_LEVEL: "warn",
      },
    });
    try {
      runs.push(...(await paraphraseRuns(use, "use-lite", ["hybrid", "semantic"])));
    } finally {
      await use.stop();
      await e.stop();
    }
  }
  for (const r of runs)
    o.log(`paraphrases ${r.name} ${r.mode}: top 1 ${r.top1.toFixed(3)}, top 3 ${r.top3.toFixed(3)}`);
  return runs;
}

export interface CostRun {
  embedder: string;
  cpuMsPerStore: number;
  mainCpuMsPerStore: number;
  storeP50: number;
  anonMiB: number;
  searchP50: number;
  searchP99: number;
}

const key = "memd_bench_default_embedder_key_0123456789";
const quantile = (xs: number[], q: number) => [...xs].sort((a, b) => a - b)[Math.floor(q * (xs.length - 1))] ?? 0;

/** utime + stime of a /proc stat file (fields 14 and 15; 11 and 12 after the command), in ms (100 Hz ticks). */
async function cpuMsOf(statFile: string) {
  const stat = (await Bun.file(statFile).text()).split(") ")[1].split(" ");
  return (Number(stat[11]) + Number(stat[12])) * 10;
}

async function procFigures(pid: number) {
  const status = await Bun.file(`/proc/${pid}/status`).text();
  return {
    anonMiB: Number(/^RssAnon:\s+(\d+) kB/m.exec(status)?.[1] ?? 0) / 1024,
    cpuMs: await cpuMsOf(`/proc/${pid}/stat`),
    // The thread that serves requests (its id is the process's): the request path, without the
    // built-in embedder's thread or lmdb's and the runtime's other threads.
    // From schedstat (ns; stat's ticks are 10 ms, a few % of a short run).
    mainCpuMs: Number((await Bun.file(`/proc/${pid}/task/${pid}/schedstat`).text()).split(" ")[0]) / 1e6,
  };
}

async function costRun(embedder: "builtin" | "none", texts: string[], queries: string[]): Promise<CostRun> {
  const tmp = tempDir("memd-bench-embedder-");
  const port = 14000 + Math.floor(Math.random() * 5000);
  // From the source (the same code the binary holds; the table is read the same way).
  const cmd = [process.execPath, "run", join(root, "src/main.ts")];
  const proc = Bun.spawn([...cmd, "serve", "--port", String(port), "--data-dir", tmp.dir], {
    env: { PATH: process.env.PATH!, MEMD_API_KEY: key, MEMD_LOG_LEVEL: "warn", MEMD_EMBEDDER: embedder },
    stdout: "ignore",
    stderr: "inherit",
  });
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; ; i++) {
    if (i > 3000) throw new Error("server never became ready");
    try {
      if ((await fetch(`${url}/readyz`)).status === 200) break;
    } catch {}
    await Bun.sleep(10);
  }
  const post = async (path: string, body: unknown) => {
    const r = await fetch(url + path, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    if (r.status !== 200) throw new Error(`${path} answered ${r.status}: ${await r.text()}`);
    return r.json();
  };
  try {
    const before = await procFigures(proc.pid);
    const storeMs: number[] = [];
    let next = 0;
    await Promise.all(
      Array.from({ length: 8 }, async () => {
        while (next < texts.length) {
          const i = next++;
          const t0 = performance.now();
          await post("/v1/memory", { namespace: "b", entity: `e${i % 10}`, content: texts[i], infer: false });
          storeMs.push(performance.now() - t0);
        }
      }),
    );
    // The background embedding of the last stores (its pass starts 200 ms after a commit and
    // embeds 64 in a few ms). Not a search: the first one loads the namespace's vectors into
    // memory, a search's cost (counted here until this stop, it made ~0.03 ms of the serving
    // thread's CPU a store).
    await Bun.sleep(2000);
    const stored = await procFigures(proc.pid);
    const pending = await fetch(`${url}/metrics`, { headers: { authorization: `Bearer ${key}` } })
      .then((r) => r.text())
      .then((t) => Number(/^memd_embed_pending (\d+)/m.exec(t)?.[1] ?? Number.NaN));
    if (pending !== 0) throw new Error(`${pending} memories still wait for their vectors 2 s after the last store`);
    await post("/v1/memory/search", { namespace: "b", entity: "e0", query: "warm up" });
    const searchMs: number[] = [];
    for (let i = 0; i < queries.length; i++) {
      const t0 = performance.now();
      await post("/v1/memory/search", { namespace: "b", entity: `e${i % 10}`, query: queries[i], limit: 10 });
      searchMs.push(performance.now() - t0);
    }
    Bun.gc(true);
    await Bun.sleep(500);
    const after = await procFigures(proc.pid);
    return {
      embedder,
      cpuMsPerStore: (stored.cpuMs - before.cpuMs) / texts.length,
      mainCpuMsPerStore: (stored.mainCpuMs - before.mainCpuMs) / texts.length,
      storeP50: quantile(storeMs, 0.5),
      anonMiB: after.anonMiB,
      searchP50: quantile(searchMs, 0.5),
      searchP99: quantile(searchMs, 0.99),
    };
  } finally {
    proc.kill("SIGTERM");
    await proc.exited;
    tmp.cleanup();
  }
}

/** Costs of the built-in embedder against --embedder none, and its embedding time per text. */
export async function costBench(log: (s: string) => void, pairsOfRuns = 2, stores = 10_000) {
  const texts = templateTexts(stores);
  const queries = [...pairs.map((p) => p[1]), ...templateTexts(12_000).filter((t) => t.endsWith("?"))];
  const qs = Array.from({ length: stores }, (_, i) => queries[i % queries.length]);
  const runs: CostRun[] = [];
  // Alternated, so that a change of load on the machine touches both.
  for (const e of Array.from({ length: pairsOfRuns }, () => ["none", "builtin"] as const).flat()) {
    const r = await costRun(e, texts, qs);
    log(
      `costs ${e}: ${r.cpuMsPerStore.toFixed(3)} ms CPU a store (${r.mainCpuMsPerStore.toFixed(3)} on the request thread), store p50 ${r.storeP50.toFixed(2)} ms, RssAnon ${r.anonMiB.toFixed(0)} MiB, search p50 ${r.searchP50.toFixed(2)} ms, p99 ${r.searchP99.toFixed(2)} ms`,
    );
    runs.push(r);
  }
  const e = await builtinEmbedder();
  for (const t of texts.slice(0, 1000)) e.embed(t);
  const t0 = performance.now();
  for (const t of texts) e.embed(t);
  const embedMs = (performance.now() - t0) / texts.length;
  log(`built-in embedder: ${(embedMs * 1000).toFixed(1)} µs a text (${e.dims} dimensions)`);
  const tableBytes = Bun.file(join(root, "src/embedding/default-embedder.bin")).size;
  return { runs, embedMs, tableBytes };
}

const f3 = (x: number) => x.toFixed(3);

/** The bench's section of bench/results.md. */
export function defaultEmbedderLines(para: ParaphraseRun[], costs?: Awaited<ReturnType<typeof costBench>>): string[] {
  const ok = (b: boolean) => (b ? "met" : "**missed**");
  const kw = para.find((r) => r.name === "none");
  const hy = para.find((r) => r.name === "builtin" && r.mode === "hybrid");
  const out = [
    "## The built-in embedder (issue 38)",
    "",
    `Paraphrases: bench/paraphrase-set.json, ${pairs.length} memories in one entity, each query sharing no word with its memory (bench/default-embedder.ts).`,
    "",
    "| embedder | mode | memory first | memory in the top 3 |",
    "| --- | --- | --- | --- |",
    ...para.map((r) => `| ${r.name} | ${r.mode} | ${f3(r.top1)} | ${f3(r.top3)} |`),
    "",
  ];
  if (kw && hy)
    out.push(
      "| target | figure | |",
      "| --- | --- | --- |",
      `| built-in hybrid: memory in the top 3 ≥ 0.70 | ${f3(hy.top3)} (keyword ${f3(kw.top3)}) | ${ok(hy.top3 >= 0.7)} |`,
      "",
    );
  if (costs) {
    const avg = (e: string, f: (r: CostRun) => number) => {
      const rs = costs.runs.filter((r) => r.embedder === e);
      return rs.reduce((s, r) => s + f(r), 0) / rs.length;
    };
    const none = (f: (r: CostRun) => number) => avg("none", f);
    const bi = (f: (r: CostRun) => number) => avg("builtin", f);
    out.push(
      `Costs: a server process (bun run src/main.ts) with the built-in embedder against one with --embedder none, ${costs.runs.length / 2} run(s) each, alternated: 10,000 stores (template sentences, 10 entities of 1,000, 8 at a time), then 10,000 searches (default mode: hybrid with the built-in embedder, keyword without). The built-in embedder: ${(costs.embedMs * 1000).toFixed(1)} µs a text in this process.`,
      "",
      "| figure | --embedder none | built-in | ratio |",
      "| --- | --- | --- | --- |",
      `| CPU a store on the thread serving requests (the requests, and following the vectors the embedding thread wrote) | ${none((r) => r.mainCpuMsPerStore).toFixed(3)} ms | ${bi((r) => r.mainCpuMsPerStore).toFixed(3)} ms | ${(bi((r) => r.mainCpuMsPerStore) / none((r) => r.mainCpuMsPerStore)).toFixed(2)} |`,
      `| server CPU a store, all threads (background embedding included) | ${none((r) => r.cpuMsPerStore).toFixed(3)} ms | ${bi((r) => r.cpuMsPerStore).toFixed(3)} ms | ${(bi((r) => r.cpuMsPerStore) / none((r) => r.cpuMsPerStore)).toFixed(2)} |`,
      `| store p50 (client) | ${none((r) => r.storeP50).toFixed(2)} ms | ${bi((r) => r.storeP50).toFixed(2)} ms | ${(bi((r) => r.storeP50) / none((r) => r.storeP50)).toFixed(2)} |`,
      `| RssAnon after 10,000 stores and searches | ${none((r) => r.anonMiB).toFixed(0)} MiB | ${bi((r) => r.anonMiB).toFixed(0)} MiB | +${(bi((r) => r.anonMiB) - none((r) => r.anonMiB)).toFixed(0)} MiB (limit +150) |`,
      `| search p50, entity of 1,000 memories | ${none((r) => r.searchP50).toFixed(2)} ms | ${bi((r) => r.searchP50).toFixed(2)} ms | ${(bi((r) => r.searchP50) / none((r) => r.searchP50)).toFixed(2)} (limit 10 ms) |`,
      `| search p99 | ${none((r) => r.searchP99).toFixed(2)} ms | ${bi((r) => r.searchP99).toFixed(2)} ms | ${(bi((r) => r.searchP99) / none((r) => r.searchP99)).toFixed(2)} |`,
      "",
      "| target (issue 38) | figure | |",
      "| --- | --- | --- |",
      `| serving thread's CPU a store unchanged (within 10%; following the vectors included) | ${(bi((r) => r.mainCpuMsPerStore) / none((r) => r.mainCpuMsPerStore)).toFixed(2)}× --embedder none's | ${ok(bi((r) => r.mainCpuMsPerStore) <= 1.1 * none((r) => r.mainCpuMsPerStore))} |`,
      `| RssAnon after 10,000 stores and searches ≤ +150 MB | +${(bi((r) => r.anonMiB) - none((r) => r.anonMiB)).toFixed(0)} MiB | ${ok((bi((r) => r.anonMiB) - none((r) => r.anonMiB)) * 1.048576 <= 150)} |`,
      `| search p50 ≤ 10 ms, entity of 1,000 memories | ${bi((r) => r.searchP50).toFixed(2)} ms | ${ok(bi((r) => r.searchP50) <= 10)} |`,
      `| binary growth ≤ 40 MB | the table, ${(costs.tableBytes / 1e6).toFixed(2)} MB, and its thread's code (about 4 MiB: the storage it writes to) | ${ok(costs.tableBytes < 40e6)} |`,
      "",
    );
  }
  return out;
}

if (import.meta.main) {
  const { values } = parseArgs({
    options: {
      "no-use": { type: "boolean" },
      "no-costs": { type: "boolean" },
      "no-paraphrases": { type: "boolean" },
      runs: { type: "string" },
      stores: { type: "string" },
    },
  });
  const log = (s: string) => console.error(s);
  const para = values["no-paraphrases"] ? [] : await paraphraseBench({ use: !values["no-use"], log });
  const costs = values["no-costs"]
    ? undefined
    : await costBench(log, Number(values.runs ?? 2), Number(values.stores ?? 10_000));
  console.log(defaultEmbedderLines(para, costs).join("\n"));
}
