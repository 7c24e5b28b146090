// What following a namespace's vectors as it grows costs the store path (LMDB, issue 32): in
// process (Storage), BENCH_FOLLOW_N memories (default 50,000) stored with vectors of
// BENCH_FOLLOW_DIMS dimensions (default 768), 1,000 a call, into one namespace of a fresh data
// dir, with vector following off (keywordPrebuild 0) and on (1e9: vectors followed as memd serve
// with --keyword-prebuild follows them, keyword lists never built), alternately, BENCH_FOLLOW_ROUNDS
// rounds (default 2). CPU a store: the process's user + system CPU over the stores, the saves
// behind them included (the run waits for them); then the first semantic search after the load.
// BENCH_FOLLOW_HTTP=1: the same over HTTP, as a user meets it: `memd serve` (from source) with an
// embedding endpoint (the fake embedder, in this process) and --keyword-prebuild 0 or 1e9, raw
// stores (infer false) with BENCH_FOLLOW_HTTP_CONNECTIONS (default 8) in flight; CPU a store is
// the server process's (/proc), its saves included.
// BENCH_FOLLOW_BASE=<a memd binary> (with BENCH_FOLLOW_HTTP=1): that binary (e.g. b09d4a9's, before
// vectors were followed) against this code (BENCH_FOLLOW_NEW=<a memd binary>, else from source),
// both with their default settings (so followed past the threshold), this code with
// --keyword-prebuild 1e9 (vectors followed, keyword lists not) and with --keyword-prebuild 0
// (nothing followed), in turn each round; BENCH_FOLLOW_ALSO=<a memd binary>:
// another beside them (e.g. main before a change).
//   nice -n 10 bun run bench/vector-follow.ts
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openLmdb } from "../src/storage/lmdb/index";
import type { MemoryOp } from "../src/storage/storage";
import { startFakeEmbedder } from "../test/fake-embedder";
import { addOp, clustered } from "../test/search/clustered-vectors";

const N = Number(process.env.BENCH_FOLLOW_N ?? 50_000);
const dims = Number(process.env.BENCH_FOLLOW_DIMS ?? 768);
const rounds = Number(process.env.BENCH_FOLLOW_ROUNDS ?? 2);
const ns = "grow";
const draw = clustered(13, dims);
// The same vectors for every run (drawn once), so that runs differ only in following.
const http = process.env.BENCH_FOLLOW_HTTP === "1";
const vectors = http ? [] : Array.from({ length: N }, () => draw());
const op = (j: number) => addOp(ns, j, `memory ${j}`, vectors[j]);

async function run(follow: boolean) {
  const dir = mkdtempSync(join(tmpdir(), "memd-bench-vector-follow-"));
  try {
    const s = await openLmdb(dir, { mapSizeMb: 16 * 1024, keywordPrebuild: follow ? 1e9 : 0 });
    Bun.gc(true);
    const cpu = process.cpuUsage();
    for (let i = 0; i < N; i += 1000) {
      const ops: MemoryOp[] = [];
      for (let j = i; j < Math.min(N, i + 1000); j++) ops.push(op(j));
      await s.apply(ops, null);
    }
    // The background load and saves the following started (if any) finish before the CPU is read.
    const quiet = async () => {
      for (let last = -1, same = 0; same < 5; ) {
        await Bun.sleep(200);
        // (vectorCacheStats: not in b09d4a9, which this bench may run on to compare.)
        const w = s.vectorCacheStats?.().written ?? 0;
        same = w === last ? same + 1 : 0;
        last = w;
      }
    };
    await quiet();
    const used = process.cpuUsage(cpu);
    const perStore = (used.user + used.system) / N;
    const t = performance.now();
    await s.semanticSearch({ namespace: ns }, draw(), {}, 10);
    const first = performance.now() - t;
    const written = s.vectorCacheStats?.().written ?? 0;
    await s.close();
    return { perStore, first, written };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** A process's user + system CPU so far, µs (/proc: USER_HZ 100). */
function cpuOf(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(f[11]) + Number(f[12])) * 10_000;
}

const connections = Number(process.env.BENCH_FOLLOW_HTTP_CONNECTIONS ?? 8);
const embedder = http ? startFakeEmbedder({ dimensions: dims }) : undefined;
const key = "memd_bench_root_key_0123456789abcdef";
const words = Array.from({ length: 5000 }, (_, i) => `w${i.toString(36)}`);

const base = process.env.BENCH_FOLLOW_BASE;
const fromSource = [process.execPath, "run", join(import.meta.dir, "../src/main.ts")];
const newer = process.env.BENCH_FOLLOW_NEW ? [process.env.BENCH_FOLLOW_NEW] : fromSource;
/** Another binary beside them (e.g. main before a change), with its defaults. */
const also = process.env.BENCH_FOLLOW_ALSO;

/**
 * The same stores over HTTP to `memd serve` (see above): `follow` sets --keyword-prebuild (1e9 or
 * 0), undefined leaves the default; `memd`: the command (this code from source by default).
 */
async function runHttp(follow: boolean | undefined, memd = fromSource) {
  const dir = mkdtempSync(join(tmpdir(), "memd-bench-vector-follow-"));
  const port = 20_000 + Math.floor(Math.random() * 20_000);
  const proc = Bun.spawn([...memd, "serve", "--port", String(port), "--data-dir", dir], {
    env: {
      PATH: process.env.PATH!,
      MEMD_API_KEY: key,
      MEMD_LOG_LEVEL: "warn",
      MEMD_EMBED_BASE_URL: embedder!.url,
      MEMD_EMBED_MODEL: "fake",
      ...(follow === undefined ? {} : { MEMD_KEYWORD_PREBUILD: follow ? "1000000000" : "0" }),
    },
    stdout: "ignore",
    stderr: "inherit",
  });
  const url = `http://127.0.0.1:${port}`;
  try {
    for (let i = 0; ; i++) {
      if (i > 3000 || proc.exitCode !== null) throw new Error("server did not start");
      if ((await fetch(`${url}/readyz`).catch(() => undefined))?.status === 200) break;
      await Bun.sleep(10);
    }
    const headers = { "content-type": "application/json", authorization: `Bearer ${key}` };
    const body = (j: number) =>
      JSON.stringify({
        namespace: ns,
        entity: `e${j % 1000}`,
        content: Array.from({ length: 8 }, (_, k) => words[(j * 7 + k * 131) % words.length]).join(" "),
        infer: false,
      });
    const cpu = cpuOf(proc.pid);
    let next = 0;
    const worker = async () => {
      for (let j = next++; j < N; j = next++) {
        const r = await fetch(`${url}/v1/memory`, { method: "POST", headers, body: body(j) });
        if (r.status !== 200 && r.status !== 201) throw new Error(`store: ${r.status} ${await r.text()}`);
      }
    };
    await Promise.all(Array.from({ length: connections }, worker));
    // The background load and saves the following started (if any) finish before the CPU is read.
    for (let last = -1, same = 0; same < 5; ) {
      await Bun.sleep(200);
      const now = cpuOf(proc.pid);
      same = now - last < 20_000 ? same + 1 : 0; // under 2% of a core meanwhile
      last = now;
    }
    const perStore = (cpuOf(proc.pid) - cpu) / N;
    const t = performance.now();
    const r = await fetch(`${url}/v1/memory/search`, {
      method: "POST",
      headers,
      body: JSON.stringify({ namespace: ns, query: words[1], mode: "semantic", limit: 10 }),
    });
    if (r.status !== 200) throw new Error(`search: ${r.status}`);
    const first = performance.now() - t;
    return { perStore, first, written: Number.NaN };
  } finally {
    proc.kill();
    await proc.exited;
    rmSync(dir, { recursive: true, force: true });
  }
}

if (http && base) {
  // Today's binary, this code and this code following nothing, in turn (the order turns each round).
  const rows: string[] = [];
  for (let r = 0; r < rounds; r++) {
    const arms: [string, () => Promise<{ perStore: number; first: number }>][] = [
      ["base", () => runHttp(undefined, [base])],
      ["new", () => runHttp(undefined, newer)],
      ["off", () => runHttp(false, newer)],
      // Vectors followed, keyword lists not (their prebuild threshold above N): following vectors' own share.
      ["vectors", () => runHttp(true, newer)],
    ];
    if (also) arms.push(["also", () => runHttp(undefined, [also])]);
    const got: Record<string, { perStore: number; first: number }> = {};
    for (let i = 0; i < arms.length; i++) {
      const [name, go] = arms[(i + r) % arms.length];
      got[name] = await go();
    }
    const { base: b, new: n, off: o, vectors: v, also: a } = got;
    const againstAlso = a ? ` ${a.perStore.toFixed(1)} µs (${(a.perStore / b.perStore).toFixed(2)}×) |` : "";
    rows.push(
      `| ${r + 1} | ${b.perStore.toFixed(1)} µs |${againstAlso} ${n.perStore.toFixed(1)} µs | ${v.perStore.toFixed(1)} µs | ${o.perStore.toFixed(1)} µs | **${(n.perStore / b.perStore).toFixed(2)}×** | **${(v.perStore / b.perStore).toFixed(2)}×** | ${(n.perStore / o.perStore).toFixed(2)}× | ${(v.perStore / o.perStore).toFixed(2)}× | ${b.first.toFixed(0)} / ${n.first.toFixed(0)} / ${v.first.toFixed(0)} / ${o.first.toFixed(0)} ms |`,
    );
    console.error(rows.at(-1));
  }
  console.log(`
### The store path against today's (${base}), following vectors (LMDB, issue 32, over HTTP)

${N.toLocaleString("en")} raw stores over HTTP (${connections} in flight, one namespace) with an embedding endpoint giving vectors of ${dims} dimensions, to today's binary and to this code (${newer.join(" ")}) with their default settings, to this code with --keyword-prebuild 1e9 (vectors followed, keyword lists not) and with --keyword-prebuild 0 (nothing followed), in turn, a fresh data dir each (CPU of the server process over the stores and the saves behind them).

| round | CPU a store, today |${also ? ` ${also}, / today |` : ""} this code | vectors only | nothing followed | this / today | vectors only / today | this / nothing followed | vectors only / nothing followed | first semantic search, today / this / vectors only / nothing followed |
|---|---|${also ? "---|" : ""}---|---|---|---|---|---|---|---|
${rows.join("\n")}
`);
  await embedder?.stop();
  process.exit(0);
}

const rows: string[] = [];
const ratios: number[] = [];
for (let r = 0; r < rounds; r++) {
  const off = http ? await runHttp(false) : await run(false);
  const on = http ? await runHttp(true) : await run(true);
  ratios.push(on.perStore / off.perStore);
  rows.push(
    `| ${r + 1} | ${off.perStore.toFixed(1)} µs | ${on.perStore.toFixed(1)} µs${Number.isNaN(on.written) ? "" : ` (${on.written} saves)`} | **${(on.perStore / off.perStore).toFixed(2)}×** | ${off.first.toFixed(0)} / ${on.first.toFixed(0)} ms |`,
  );
  console.error(rows.at(-1));
}
console.log(`
### Following a namespace's vectors as it grows (LMDB, issue 32${http ? ", over HTTP" : ""})

${
  http
    ? `${N.toLocaleString("en")} raw stores over HTTP (${connections} in flight, one namespace) to memd serve with an embedding endpoint giving vectors of ${dims} dimensions; --keyword-prebuild 0 and 1e9 (vectors followed, keyword lists not) alternately, a fresh data dir each (CPU of the server process over the stores and the saves behind them).`
    : `${N.toLocaleString("en")} memories stored with vectors of ${dims} dimensions (Storage.apply, 1,000 a call, one namespace), in process; following off and on alternately (CPU of the process over the stores and the saves behind them).`
}

| round | CPU a store, not followed | followed | ratio | first semantic search after the load, off / on |
|---|---|---|---|---|
${rows.join("\n")}
`);
await embedder?.stop();
process.exit(0);
