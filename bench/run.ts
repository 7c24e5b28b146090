// `make bench`: measures memd against the machine's own ceiling and writes bench/results.md.
// Server processes run on CPU 0 and the load generator (wrk, from Debian's packages; see
// `make bench-deps`) on CPU 1, so the two never fight for a core. Every figure is taken in the
// same run as the ceiling it is compared with.
import { mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { crashRound } from "../test/crash-run";
import { startFakeModel } from "../test/fake-model";
import { createDatabase } from "../test/helpers";
import { beamBench, beamTable, defaultBeamData } from "./beam";
import { contextBench } from "./context";
import { costBench, defaultEmbedderLines, paraphraseBench } from "./default-embedder";
import { lifecycleBench } from "./lifecycle";
import {
  type ContextRun,
  contextTable,
  defaultData,
  issue36Targets,
  locomoBench,
  locomoTables,
  locomoTargets,
  type ReachRun,
  reachTable,
} from "./locomo";
import { describeRow, entriesFloorCommand, floorCommand, type StorePathRow, storePath } from "./store-path";
import { streamBench, streamTable } from "./stream";
import { timeBench } from "./time";
import { webhookBench, webhookTable } from "./webhooks";
import { type WrkResult, wrk } from "./wrk";

const root = join(import.meta.dir, "..");
const bin = join(root, "dist/memd");
const key = "memd_bench_root_key_0123456789abcdef";
const serverCpu = "0";
const loadCpu = "1";
const work = mkdtempSync(join(tmpdir(), "memd-bench-"));
const seconds = Number(process.env.BENCH_SECONDS ?? 5);
const soakRounds = Number(process.env.BENCH_CRASH_ROUNDS ?? 20);
const started = performance.now();
const lines: string[] = [];
const log = (s: string) => console.log(`[bench ${((performance.now() - started) / 1000).toFixed(0)}s] ${s}`);

// Below the ephemeral range (32768+), so a port is never taken by a client socket of wrk.
let nextPort = 12000 + Math.floor(Math.random() * 8000);
type Server = { proc: Bun.Subprocess; url: string; readyMs: number };

async function waitReady(url: string, proc: Bun.Subprocess, t0: number): Promise<number> {
  while (performance.now() - t0 < 60_000) {
    if (proc.exitCode !== null) throw new Error(`server exited with ${proc.exitCode}`);
    try {
      if ((await fetch(`${url}/readyz`)).status === 200) return performance.now() - t0;
    } catch {}
    await Bun.sleep(2);
  }
  throw new Error(`${url} never became ready`);
}

/** Starts a command pinned to the server CPU and waits until `url`/readyz answers 200. */
async function startPinned(cmd: string[], env: Record<string, string>, port: number): Promise<Server> {
  const t0 = performance.now();
  const proc = Bun.spawn(["taskset", "-c", serverCpu, ...cmd], {
    env: { PATH: process.env.PATH!, ...env },
    stdout: "ignore",
    stderr: "inherit",
  });
  const url = `http://127.0.0.1:${port}`;
  return { proc, url, readyMs: await waitReady(url, proc, t0) };
}

function startMemd(dataDir: string, env: Record<string, string> = {}): Promise<Server> {
  const port = nextPort++;
  return startPinned(
    [bin, "serve", "--port", String(port), "--data-dir", dataDir],
    { MEMD_API_KEY: key, MEMD_LOG_LEVEL: "warn", ...env },
    port,
  );
}

async function stop(s: Server) {
  s.proc.kill("SIGTERM");
  await s.proc.exited;
}

/** One wrk run pinned to the load CPU (bench/wrk.ts); latencies in ms. */
const runWrk = (url: string, conns: number, opts: { body?: unknown; secs?: number } = {}) =>
  wrk(url, conns, { key, cpu: loadCpu, secs: opts.secs ?? seconds, body: opts.body });

const f0 = (n: number) => Math.round(n).toLocaleString("en-US");
const ms = (n: number) => `${n.toFixed(2)} ms`;
const pctOf = (a: number, b: number) => `${((100 * a) / b).toFixed(0)}%`;
const storeBody = {
  namespace: "bench",
  entity: "user-1",
  content: "the user prefers green tea in the morning",
  infer: false,
};

// 1. Ceiling and raw store.
log("ceiling");
const ceilingPort = nextPort++;
const ceiling = await startPinned(
  [process.execPath, "run", join(import.meta.dir, "ceiling.ts"), String(ceilingPort)],
  {},
  ceilingPort,
);
await runWrk(`${ceiling.url}/`, 64, { body: storeBody, secs: 1 }); // warm-up
const ceil = await runWrk(`${ceiling.url}/`, 64, { body: storeBody });
await stop(ceiling);

log("raw store");
const rawDir = join(work, "raw");
let s = await startMemd(rawDir);
await runWrk(`${s.url}/v1/memory`, 64, { body: storeBody, secs: 1 });
const store1 = await runWrk(`${s.url}/v1/memory`, 1, { body: storeBody });
const store64 = await runWrk(`${s.url}/v1/memory`, 64, { body: storeBody });
await stop(s);
s = await startMemd(rawDir, { MEMD_LOG_LEVEL: "info" });
const store64info = await runWrk(`${s.url}/v1/memory`, 64, { body: storeBody });
await stop(s);

// 1b. Issue 13's figure: CPU per durable raw store and req/s as ratios to the ceiling, alternating
// with it in each round (bench/store-path.ts), on LMDB and on a PostgreSQL if one is given
// (`make bench` runs under scripts/with-postgres, which provides a throwaway one).
const pathRounds = Number(process.env.BENCH_STORE_PATH_ROUNDS ?? 3);
// "Today" in issue 32's text ("the raw store path stays within 10% of today's CPU per store"): the
// code when it was filed, b09d4a9. BENCH_TODAY names a binary of it (e.g. /work/baseline/dist/memd):
// the LMDB store path then runs it and dist/memd with --embedder none (b09d4a9 had no built-in
// embedder) in the same rounds, and bench/tenants.ts's bulk loads on LMDB run it beside dist/memd.
const today = process.env.BENCH_TODAY;
const todayLabels = { today: "today", none: "memd --embedder none" };
const storePaths: { backend: string; row: StorePathRow; unpinned?: boolean }[] = [];
log(`store path against the ceiling, LMDB, ${pathRounds} rounds, with the floors (bench/store-floor.ts)`);
/** The floors: not memd, context for its figure (bench/store-floor.ts). */
const floors: Record<string, { command: string[]; backend: string }> = {
  floor: { command: floorCommand, backend: "LMDB floor: HTTP and memd's LMDB apply, no app" },
  ...Object.fromEntries(
    [1, 4, 7].map((n) => [
      `entries ${n}`,
      {
        command: entriesFloorCommand(n),
        backend: `floor: HTTP and ${n} durable LMDB ${n === 1 ? "entry" : "entries"}, nothing else`,
      },
    ]),
  ),
};
for (const row of await storePath({
  rounds: pathRounds,
  secs: seconds,
  memd: {
    memd: [bin],
    ...(today ? { [todayLabels.today]: [today], [todayLabels.none]: ["env", "MEMD_EMBEDDER=none", bin] } : {}),
    ...Object.fromEntries(Object.entries(floors).map(([k, f]) => [k, f.command])),
  },
  log,
}))
  storePaths.push({
    backend:
      floors[row.label]?.backend ??
      (row.label === todayLabels.today
        ? `LMDB, today (${today}, the code when issue 32 was filed)`
        : row.label === todayLabels.none
          ? "LMDB, --embedder none (as today, which had no built-in embedder)"
          : "LMDB (data dir on the bench's disk)"),
    row,
  });
/** Issue 32: dist/memd's CPU a store against today's in the same rounds (medians of the rounds' ratios). */
const againstToday = (() => {
  const of = (label: string) => storePaths.find(({ row, unpinned }) => !unpinned && row.label === label)?.row;
  const base = of(todayLabels.today);
  if (!base) return [];
  return [todayLabels.none, "memd"].map((label) => {
    const row = of(label)!;
    const each = row.rounds.map((r, i) => r.cpuRatio / base.rounds[i].cpuRatio);
    const sorted = [...each].sort((a, b) => a - b);
    const median =
      sorted.length % 2
        ? sorted[(sorted.length - 1) / 2]
        : (sorted[sorted.length / 2 - 1] + sorted[sorted.length / 2]) / 2;
    return { label, median, each };
  });
})();
log(`store path against the ceiling, LMDB, servers unpinned, ${pathRounds} rounds`);
for (const row of await storePath({ rounds: pathRounds, secs: seconds, memd: { memd: [bin] }, unpinned: true, log }))
  storePaths.push({ backend: "LMDB, servers unpinned (both cores; wrk on CPU 1)", row, unpinned: true });
const pgUrl = process.env.MEMD_BENCH_DATABASE_URL ?? process.env.MEMD_TEST_DATABASE_URL;
if (pgUrl?.startsWith("postgres")) {
  log(`store path against the ceiling, PostgreSQL, ${pathRounds} rounds`);
  for (const row of await storePath({
    rounds: pathRounds,
    secs: seconds,
    memd: { memd: [bin] },
    databaseUrl: pgUrl,
    log,
  }))
    storePaths.push({ backend: "PostgreSQL (local, fsync on; its own CPU not counted)", row });
} else log(`no PostgreSQL for the store path figure (${pgUrl ?? "MEMD_BENCH_DATABASE_URL unset"})`);
for (const { row } of storePaths) log(describeRow(row));
/** The rows of memd itself (the floors are context, not targets). */
const memdPaths = storePaths.filter(({ row }) => !(row.label in floors) && row.label !== todayLabels.today);

// 2. Diff and events latency at 10,000 and 1,000,000 stored events (bulk-loaded, see load.ts).
interface Loaded {
  memories: number;
  seconds: number;
  hot: Record<string, string>;
  since: string;
}
function load(dir: string, n: number): Loaded {
  const p = Bun.spawnSync([process.execPath, "run", join(import.meta.dir, "load.ts"), dir, String(n)], {
    stderr: "inherit",
  });
  if (p.exitCode !== 0) throw new Error("load failed");
  return JSON.parse(p.stdout.toString().trim().split("\n").at(-1)!);
}
const readSecs = Math.max(2, Math.round(seconds * 0.6));
const reads: Record<string, Record<string, WrkResult>> = {};
const sizes: Record<string, Loaded> = {};
const startup: Record<string, number> = {};
let rss = { hwm: 0, anon: 0, file: 0 };
for (const n of [10_000, 1_000_000]) {
  log(`loading ${f0(n)} memories`);
  const dir = join(work, `m${n}`);
  const loaded = load(dir, n);
  sizes[n] = loaded;
  const times: number[] = [];
  for (let i = 0; i < 5; i++) {
    const srv = await startMemd(dir);
    times.push(srv.readyMs);
    await stop(srv);
  }
  startup[n] = times.sort((a, b) => a - b)[2];
  log(`reads at ${f0(n)}`);
  s = await startMemd(dir);
  const r: Record<string, WrkResult> = {};
  for (const answer of [10, 200]) {
    r[`diff ${answer}`] = await runWrk(`${s.url}/v1/memory/diff`, 1, {
      body: { namespace: "bench", since: loaded.since, limit: answer },
      secs: readSecs,
    });
    r[`events ns ${answer}`] = await runWrk(`${s.url}/v1/memory/events?namespace=bench&limit=${answer}`, 1, {
      secs: readSecs,
    });
    r[`events memoryId ${answer}`] = await runWrk(
      `${s.url}/v1/memory/events?memoryId=${loaded.hot[answer]}&limit=${answer}`,
      1,
      { secs: readSecs },
    );
  }
  // Some writes on the big store too, so the peak covers both paths.
  r.store64 = await runWrk(`${s.url}/v1/memory`, 64, { body: storeBody, secs: readSecs });
  reads[n] = r;
  if (n === 1_000_000) {
    const status = await Bun.file(`/proc/${s.proc.pid}/status`).text();
    const kb = (k: string) => Number(new RegExp(`^${k}:\\s+(\\d+) kB`, "m").exec(status)?.[1] ?? 0) / 1024;
    rss = { hwm: kb("VmHWM"), anon: kb("RssAnon"), file: kb("RssFile") };
  }
  await stop(s);
}
const emptyDir = join(work, "empty");
const emptyTimes: number[] = [];
for (let i = 0; i < 5; i++) {
  rmSync(emptyDir, { recursive: true, force: true });
  const srv = await startMemd(emptyDir);
  emptyTimes.push(srv.readyMs);
  await stop(srv);
}
startup[0] = emptyTimes.sort((a, b) => a - b)[2];

// 3. Smart store with a fake model that answers at once: time minus model time.
log("smart store");
const fake = startFakeModel();
let facts = 0;
fake.reply(() =>
  JSON.stringify({
    operations: [{ fact: `the user likes tea number ${++facts}`, decision: "ADD", category: "preference" }],
  }),
);
s = await startMemd(join(work, "smart"), { MEMD_LLM_BASE_URL: fake.url, MEMD_LLM_MODEL: "fake" });
const modelTotals = async () => {
  const text = await (await fetch(`${s.url}/metrics`, { headers: { authorization: `Bearer ${key}` } })).text();
  const num = (name: string) => Number(new RegExp(`^${name} ([\\d.e+-]+)$`, "m").exec(text)?.[1] ?? Number.NaN);
  return { calls: num("memd_model_calls_total"), seconds: num("memd_model_call_seconds_total") };
};
const post = async (body: unknown) => {
  const t0 = performance.now();
  const res = await fetch(`${s.url}/v1/memory`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  if (res.status !== 200) throw new Error(`store answered ${res.status}: ${await res.text()}`);
  await res.arrayBuffer();
  return performance.now() - t0;
};
const smartN = 1000;
const sequential = async (infer: boolean) => {
  for (let i = 0; i < 100; i++)
    await post({ namespace: "smart", entity: `user-${i % 20}`, content: `I like tea ${i}`, infer });
  const before = await modelTotals();
  const times: number[] = [];
  for (let i = 0; i < smartN; i++)
    times.push(await post({ namespace: "smart", entity: `user-${i % 20}`, content: `I like tea ${i}`, infer }));
  const after = await modelTotals();
  times.sort((a, b) => a - b);
  return {
    p50: times[Math.floor(smartN / 2)],
    p99: times[Math.floor(smartN * 0.99)],
    calls: (after.calls - before.calls) / smartN,
    modelMs: ((after.seconds - before.seconds) * 1000) / smartN,
  };
};
const smart = await sequential(true);
const rawSeq = await sequential(false);
await stop(s);
await fake.stop();

// Live change stream: 1 and 10 subscribers while raw stores run at full speed (bench/stream.ts).
log("live change stream, 1 and 10 subscribers");
const streamDir = join(work, "stream");
const ss = await startMemd(streamDir);
const streamRows = [await streamBench(ss.url, key, 1, { seconds }), await streamBench(ss.url, key, 10, { seconds })];
await stop(ss);

// Webhooks (issue 34): delivery from a backlog, lag under full-speed stores, the store path with ten (bench/webhooks.ts).
log("webhooks: backlog, lag, store path with ten subscriptions");
// With BENCH_TODAY, the store path with ten delivering is also run against today's raw stores
// (issue 34's "within 10% of today"): both without an embedder, as today had none.
const noEmbedder: Record<string, string> = today ? { MEMD_EMBEDDER: "none" } : {};
const webhookToday = async (dir: string, env: Record<string, string> = {}) => {
  if (!today) return undefined;
  const port = nextPort++;
  return startPinned(
    [today, "serve", "--port", String(port), "--data-dir", join(work, dir)],
    { MEMD_API_KEY: key, MEMD_LOG_LEVEL: "warn", ...noEmbedder, ...env },
    port,
  );
};
const ws = await startMemd(join(work, "webhooks"), { MEMD_WEBHOOK_ALLOW_PRIVATE: "1", ...noEmbedder });
const wt = await webhookToday("webhooks-today");
const webhookFigures = await webhookBench(ws.url, key, {
  seconds,
  pid: ws.proc.pid,
  today: wt && { url: wt.url, pid: wt.proc.pid },
});
await stop(ws);
if (wt) await stop(wt);
// The same on the throwaway PostgreSQL (a fresh database), when there is one.
let webhookFiguresPg: Awaited<ReturnType<typeof webhookBench>> | undefined;
if (pgUrl?.startsWith("postgres")) {
  log("webhooks on PostgreSQL");
  const wp = await startMemd(join(work, "webhooks-pg"), {
    MEMD_WEBHOOK_ALLOW_PRIVATE: "1",
    MEMD_DATABASE_URL: await createDatabase(pgUrl),
    ...noEmbedder,
  });
  const wtp = await webhookToday("webhooks-pg-today", { MEMD_DATABASE_URL: await createDatabase(pgUrl) });
  webhookFiguresPg = await webhookBench(wp.url, key, {
    seconds,
    pid: wp.proc.pid,
    today: wtp && { url: wtp.url, pid: wtp.proc.pid },
  });
  await stop(wp);
  if (wtp) await stop(wtp);
}

// 4. Crash soak: 20 rounds of SIGKILL under 32 writers on one data dir.
log(`crash soak, ${soakRounds} rounds`);
const soak = { passed: 0, acked: 0, found: 0, problems: [] as string[] };
for (let i = 0; i < soakRounds; i++) {
  const r = await crashRound(bin, join(work, "crash"), { namespace: `soak-${i}` });
  soak.acked += r.acked;
  soak.found += r.found;
  if (r.problems.length === 0) soak.passed++;
  else soak.problems.push(...r.problems.slice(0, 3).map((p) => `round ${i + 1}: ${p}`));
}

// 5. Results.
const binMiB = statSync(bin).size / 1048576;
const cpu = (await Bun.file("/proc/cpuinfo").text()).match(/^model name\s+: (.+)$/m)?.[1] ?? "unknown CPU";
const ratio64 = store64.rps / ceil.rps;
const big = reads[1_000_000];
const small = reads[10_000];
const readRows = [
  "diff 10",
  "diff 200",
  "events ns 10",
  "events ns 200",
  "events memoryId 10",
  "events memoryId 200",
].map((k) => {
  const [a, b] = [small[k], big[k]];
  return `| ${k
    .replace("ns", "by namespace,")
    .replace("memoryId", "by memoryId,")
    .replace(
      / (\d+)$/,
      " $1 events",
    )} | ${ms(a.p50)} | ${ms(a.p99)} | ${ms(b.p50)} | ${ms(b.p99)} | ${(b.p99 / a.p99).toFixed(2)}x |`;
});
const p99at1M200 = Math.max(big["diff 200"].p99, big["events ns 200"].p99, big["events memoryId 200"].p99);
const worstGrowth = Math.max(
  ...["diff 200", "events ns 200", "events memoryId 200"].map((k) => big[k].p99 / small[k].p99),
);
const overhead = smart.p50 - smart.modelMs;
const ok = (b: boolean) => (b ? "met" : "**missed**");

lines.push(
  "# memd benchmark results",
  "",
  `Written by \`make bench\` (bench/run.ts) on ${new Date().toISOString()}, memd ${Bun.spawnSync([bin, "--version"]).stdout.toString().trim()}.`,
  `Machine: ${cpu}, 2 cores. **Server on CPU ${serverCpu}, load generator (wrk 4.1, 1 thread) on CPU ${loadCpu}** (taskset), for the ceiling and memd alike.`,
  `Runs of ${seconds} s (reads: ${readSecs} s) after a 1 s warm-up. Store runs use \`--log-level warn\` unless marked; every 2xx store answer is durable (flushed to disk).`,
  "",
  "## Targets",
  "",
  "| target | figure | |",
  "|---|---|---|",
  `| raw store ≥ 40% of the ceiling at 64 connections | ${pctOf(store64.rps, ceil.rps)} (${f0(store64.rps)} / ${f0(ceil.rps)} req/s) | ${ok(ratio64 >= 0.4)} |`,
  ...memdPaths.map(
    ({ backend, row }) =>
      `| durable raw store CPU ≤ 3× the ceiling's per request, ${backend} | ${row.cpuRatio.toFixed(2)}× (${row.cpuUs.toFixed(1)} / ${row.ceilingCpuUs.toFixed(1)} µs), median of ${row.rounds.length} | ${ok(row.cpuRatio <= 3)} |`,
  ),
  ...memdPaths.map(({ backend, row, unpinned }) => {
    const want = unpinned ? 0.3 : 0.4;
    return `| raw store ≥ ${pctOf(want, 1)} of the ceiling's req/s, ${unpinned ? "" : "server pinned, "}${backend} | ${pctOf(row.rpsRatio, 1)}, median of ${row.rounds.length} | ${ok(row.rpsRatio >= want)} |`;
  }),
  ...againstToday.map(
    ({ label, median, each }) =>
      `| issue 32: raw store CPU within 10% of today's (${today}), LMDB, ${label}, same rounds | ${median.toFixed(2)}× (rounds ${each.map((x) => x.toFixed(2)).join(", ")}) | ${ok(median <= 1.1)} |`,
  ),
  `| diff/events p99 < 5 ms, 200-event answer, 1,000,000 events | worst ${ms(p99at1M200)} | ${ok(p99at1M200 < 5)} |`,
  `| ... and ≤ 1.5× the 10,000-event figure | worst ${worstGrowth.toFixed(2)}x | ${ok(worstGrowth <= 1.5)} |`,
  `| smart-store overhead < 2 ms p50 | ${ms(overhead)} | ${ok(overhead < 2)} |`,
  `| peak RSS < 300 MB at 1,000,000 memories | ${f0(rss.hwm)} MiB (anonymous ${f0(rss.anon)} MiB, mapped file ${f0(rss.file)} MiB at the end) | ${ok(rss.hwm < 300)} |`,
  "",
  "## Store throughput against the ceiling",
  "",
  "| what | connections | req/s | ratio to ceiling | p50 | p99 | errors |",
  "|---|---|---|---|---|---|---|",
  `| ceiling: Bun.serve, parse the same JSON body, answer small JSON | 64 | ${f0(ceil.rps)} | 100% | ${ms(ceil.p50)} | ${ms(ceil.p99)} | ${ceil.errors} |`,
  `| raw store (infer: false) | 1 | ${f0(store1.rps)} | ${pctOf(store1.rps, ceil.rps)} | ${ms(store1.p50)} | ${ms(store1.p99)} | ${store1.errors} |`,
  `| raw store (infer: false) | 64 | ${f0(store64.rps)} | ${pctOf(store64.rps, ceil.rps)} | ${ms(store64.p50)} | ${ms(store64.p99)} | ${store64.errors} |`,
  `| raw store, default log level (info, one line per request) | 64 | ${f0(store64info.rps)} | ${pctOf(store64info.rps, ceil.rps)} | ${ms(store64info.p50)} | ${ms(store64info.p99)} | ${store64info.errors} |`,
  `| raw store on the 1,000,000-memory store | 64 | ${f0(big.store64.rps)} | ${pctOf(big.store64.rps, ceil.rps)} | ${ms(big.store64.p50)} | ${ms(big.store64.p99)} | ${big.store64.errors} |`,
  "",
  "## Store path against the ceiling (issue 13)",
  "",
  `Server CPU time per request (utime + stime of the server process over the run / requests) and req/s at 64 connections, each as a ratio to the ceiling measured in the same round (bench/store-path.ts; ${pathRounds} rounds alternating ceiling and memd, medians of the per-round ratios). Log level info (one line per request). The floor rows are not memd (bench/store-floor.ts): a bare Bun.serve that parses the body and applies the store through memd's LMDB storage, with no authentication, validation, log or metrics, to show how much of memd's figure the storage alone takes; and the same server writing only N LMDB entries per request (the body as a record, N - 1 index entries), group-committed and flushed as memd does, to show what durable writes through lmdb-js cost by their number. memd's raw store writes 7 entries.`,
  "",
  "| backend | CPU per store | ceiling CPU per request | CPU ratio | req/s | ceiling req/s | req/s ratio | per round (CPU ratio / req/s ratio) |",
  "|---|---|---|---|---|---|---|---|",
  ...storePaths.map(
    ({ backend, row }) =>
      `| ${backend} | ${row.cpuUs.toFixed(1)} µs | ${row.ceilingCpuUs.toFixed(1)} µs | **${row.cpuRatio.toFixed(2)}×** | ${f0(row.rps)} | ${f0(row.ceilingRps)} | **${pctOf(row.rpsRatio, 1)}** | ${row.rounds.map((r) => `${r.cpuRatio.toFixed(2)}× / ${pctOf(r.rpsRatio, 1)}`).join(", ")} |`,
  ),
  "",
  "## Diff and events latency, 1 connection",
  "",
  `Answers of 10 and 200 events. Diff: namespace \`bench\` from a \`since\` in the middle of the history. Events by memoryId: memories with 10 and 200 events. Stores bulk-loaded by bench/load.ts (${f0(sizes[10_000].memories)} in ${sizes[10_000].seconds.toFixed(1)} s; ${f0(sizes[1_000_000].memories)} in ${sizes[1_000_000].seconds.toFixed(1)} s).`,
  "",
  "| query | 10k p50 | 10k p99 | 1M p50 | 1M p99 | 1M/10k p99 |",
  "|---|---|---|---|---|---|",
  ...readRows,
  "",
  "## Smart store with an instant fake model",
  "",
  `Sequential requests from one client (${smartN} after 100 warm-up), fake OpenAI-compatible model in the bench process answering at once with one ADD; 20 entities, so each store also reads up to 20 candidates.`,
  "",
  "| what | p50 | p99 |",
  "|---|---|---|",
  `| smart store, whole request | ${ms(smart.p50)} | ${ms(smart.p99)} |`,
  `| model time per store (from /metrics: memd_model_call_seconds_total) | ${ms(smart.modelMs)} (mean) | |`,
  `| **overhead = request − model time** | **${ms(overhead)}** | |`,
  `| raw store, same client, for comparison | ${ms(rawSeq.p50)} | ${ms(rawSeq.p99)} |`,
  "",
  `Model calls per store: ${smart.calls.toFixed(2)}.`,
  "",
  "## Live change stream",
  "",
  `Raw stores from 32 connections at full speed for ${seconds} s while 1, then 10 subscribers follow the namespace's stream (writers and subscribers in the bench process; bench/stream.ts). Delay: from a store's answer at the writer to its event at a subscriber.`,
  "",
  ...streamTable(streamRows),
  "",
  "## Webhooks",
  "",
  `One POST per event to receivers in a process of their own (bench/webhook-receivers.ts: plain sockets answering 200 at once); raw stores from 32 connections for ${seconds} s; the store path's figures are the same run's and the same server's (so the same embedder setting), each run with ten subscriptions (matching other namespaces, or delivering every event) against the runs without beside it (bench/webhooks.ts); CPU a store from /proc, of memd's request thread and of its whole process. Deliveries run on a thread of their own, nicer than the process (docs/webhooks.md, "Under load"): on memd's one busy CPU the stores come first, and deliveries catch up after.`,
  "",
  "LMDB:",
  "",
  ...(today ? ["", `Both servers without an embedder (BENCH_TODAY: today, ${today}, had none).`, ""] : []),
  ...webhookTable(webhookFigures, today && `today's code (${today})`),
  ...(webhookFiguresPg
    ? ["", "PostgreSQL:", "", ...webhookTable(webhookFiguresPg, today && `today's code (${today})`)]
    : []),
  "",
  "## Process",
  "",
  "| what | figure |",
  "|---|---|",
  `| binary size (dist/memd) | ${binMiB.toFixed(1)} MiB |`,
  `| start-up to ready (/readyz 200), empty data dir, median of 5 | ${ms(startup[0])} |`,
  `| start-up to ready, 10,000 memories | ${ms(startup[10_000])} |`,
  `| start-up to ready, 1,000,000 memories | ${ms(startup[1_000_000])} |`,
  `| peak RSS (VmHWM) serving 1,000,000 memories | ${f0(rss.hwm)} MiB |`,
  "",
  "## Crash soak",
  "",
  `${soak.passed} of ${soakRounds} rounds passed: 32 writers, SIGKILL at a random moment, restart, check (test/crash-run.ts). ${f0(soak.acked)} stores acknowledged, ${f0(soak.found)} found after the restarts (the difference: commits that landed but whose answer was cut by the kill).`,
  ...soak.problems.map((p) => `- ${p}`),
  "",
  "## mem0",
  "",
  "Not run here: mem0's TypeScript library (`mem0ai`) needs an embedding model for every add (and a language model for inference), and this machine reaches no such endpoint. The issue's reference figures (about 300 raw adds/s, 0.9 ms per history lookup at 10,000 memories) are from another machine.",
  "",
  `Total bench time: ${((performance.now() - started) / 1000).toFixed(0)} s.`,
  "",
);
// Issue 21: the context endpoint on an entity of 1,000 memories, and recall on LoCoMo.
for (const embedder of ["none", "builtin"] as const) {
  // Issue 36's target is without an embedder (keyword search); the built-in embedder's row beside it.
  const dir = join(work, `context-${embedder}`);
  const c = await startMemd(dir, { MEMD_EMBEDDER: embedder });
  lines.push(...(await contextBench(c.url, key, log, embedder)));
  await stop(c);
}
{
  const data = process.env.BENCH_LOCOMO_DATA ?? defaultData;
  lines.push("## Recall on LoCoMo (issue 21)", "");
  if (await Bun.file(data).exists()) {
    const contextRuns: ContextRun[] = [];
    const reachRuns: ReachRun[] = [];
    const runs = await locomoBench({
      data,
      embedders: ["none", "builtin", "use", "fake"],
      sets: ["turns", "observations"],
      contextBudgets: [1000, 2000],
      contextRuns,
      reachRuns,
      log,
    });
    lines.push(
      `Data: ${data.replace(`${root}/`, "")}. bench/locomo.ts (also runnable alone): each turn (or observation) one raw memory of its conversation's entity; each question an entity-scoped search, limit 10, and (turns) a context block (POST /v1/memory/context, the question as query): keyword mode on a server without an embedder, hybrid with each. builtin: the built-in embedder (no endpoint set; the default); none: --embedder none. USE-lite: bench/use-embedder.ts; fake: test/fake-embedder.ts (256 dimensions, trigrams). Keyword rows do not depend on the embedder. Latency as the client sees it, in the bench's own process. "Before": issue 36's starting point on the same data.`,
      "",
      ...issue36Targets(runs, contextRuns),
      ...locomoTargets(runs),
      ...contextTable(contextRuns),
      ...reachTable(reachRuns),
      ...locomoTables(runs),
    );
  } else
    lines.push(
      `Not run: no data at ${data} (set BENCH_LOCOMO_DATA to data/locomo10.json of snap-research/LoCoMo).`,
      "",
    );
}
// Issue 38: the built-in embedder on a paraphrase set of its own (USE-lite beside it), and its
// costs against --embedder none: bench/default-embedder.ts, also runnable alone.
lines.push(...defaultEmbedderLines(await paraphraseBench({ use: true, log }), await costBench(log)));
// Issue 36: long memories, BEAM's 100K chats (kept outside the repository: BENCH_BEAM_DATA).
{
  const data = process.env.BENCH_BEAM_DATA ?? defaultBeamData;
  lines.push("## Long memories: BEAM (issue 36)", "");
  if (await Bun.file(join(data, "1", "chat.json")).exists()) {
    const r = await beamBench({ data, log });
    lines.push(
      "bench/beam.ts (also runnable alone): every message of each chat one raw memory of the chat's entity; each probing question with evidence an entity-scoped keyword search, limit 10. Before issue 36 (same data, same probe): hit@5 0.216, hit@10 0.266; textbook BM25 0.323 / 0.389 (the issue's figures).",
      "",
      ...beamTable(r, data.replace(`${root}/`, "")),
    );
  } else
    lines.push(
      `Not run: no data at ${data} (set BENCH_BEAM_DATA to chats/100K of github:mohammadtavakoli78/BEAM).`,
      "",
    );
}
// Lifecycle figures (export, import, erase, list paging): bench/lifecycle.ts, also runnable alone.
lines.push(await lifecycleBench(1_000_000, log));
// Search at a million memories (issue 26): keyword search from outside (bench/scale.ts: first
// search after a start, warm latency, anonymous memory) and the approximate vector index
// (bench/vectors.ts: recall@10 against exact, latency, memory per vector), each in its own process.
for (const script of ["scale.ts", "vectors.ts"]) {
  log(`search at a million memories: ${script}`);
  const p = Bun.spawnSync([process.execPath, "run", join(import.meta.dir, script)], {
    cwd: root,
    stderr: "inherit",
  });
  lines.push(p.exitCode === 0 ? p.stdout.toString() : `\n(bench/${script} failed: exit ${p.exitCode})\n`);
}
// Keyword search at a million memories on PostgreSQL (issue 26): bench/scale.ts' PostgreSQL mode,
// on a fresh database of the throwaway PostgreSQL make bench runs under (BENCH_SCALE_PG_N,
// default 1,000,000: loading it takes minutes), SQL and the replica's lists in the same run.
if (pgUrl?.startsWith("postgres")) {
  log("keyword search at a million memories on PostgreSQL: scale.ts");
  const p = Bun.spawnSync([process.execPath, "run", join(import.meta.dir, "scale.ts")], {
    cwd: root,
    stderr: "inherit",
    env: {
      ...process.env,
      BENCH_SCALE_DATABASE_URL: await createDatabase(pgUrl),
      BENCH_SCALE_N: process.env.BENCH_SCALE_PG_N ?? "1000000",
    },
  });
  lines.push(p.exitCode === 0 ? p.stdout.toString() : `\n(bench/scale.ts on PostgreSQL failed: exit ${p.exitCode})\n`);
}
// No slow first semantic search after a restart (issue 32, LMDB): bench/vector-restart.ts, the
// first search building the copy from every vector against the one reading its snapshot after a
// restart, same run (BENCH_RESTART_N, default 1,000,000). Replicas ready at start (issue 32,
// PostgreSQL): bench/pg-ready.ts on a fresh database of the throwaway PostgreSQL, a replica reading
// the search snapshots against one building its copies (BENCH_READY_N, default 1,000,000).
{
  log("first semantic search after a restart: vector-restart.ts");
  const p = Bun.spawnSync([process.execPath, "run", join(import.meta.dir, "vector-restart.ts")], {
    cwd: root,
    stderr: "inherit",
  });
  lines.push(p.exitCode === 0 ? p.stdout.toString() : `\n(bench/vector-restart.ts failed: exit ${p.exitCode})\n`);
}
// What following a growing namespace's vectors costs a store (issue 32, LMDB): bench/vector-follow.ts,
// following off and on alternately, same run (BENCH_FOLLOW_N, default 50,000).
{
  log("CPU a store while following vectors: vector-follow.ts");
  const p = Bun.spawnSync([process.execPath, "run", join(import.meta.dir, "vector-follow.ts")], {
    cwd: root,
    stderr: "inherit",
  });
  lines.push(p.exitCode === 0 ? p.stdout.toString() : `\n(bench/vector-follow.ts failed: exit ${p.exitCode})\n`);
}
if (pgUrl?.startsWith("postgres")) {
  log("replicas ready at start on PostgreSQL: pg-ready.ts");
  const p = Bun.spawnSync([process.execPath, "run", join(import.meta.dir, "pg-ready.ts")], {
    cwd: root,
    stderr: "inherit",
    env: { ...process.env, BENCH_READY_DATABASE_URL: pgUrl },
  });
  lines.push(p.exitCode === 0 ? p.stdout.toString() : `\n(bench/pg-ready.ts failed: exit ${p.exitCode})\n`);
}
// Issue 32's checks, each against its target (bench/tenants.ts, also runnable alone): many
// tenants against one namespace (BENCH_TENANTS_MANY, default the issue's "10000 20"), the same
// under a 64 MiB search-memory budget, and the first search after a bulk load and after
// `memd import` (BENCH_TENANTS_BULK, default "100000 1000000"), against dist/memd, on LMDB and on
// the throwaway PostgreSQL. Long at these sizes (estimated from its runs at 200,000 and 100,000:
// ~45 min on LMDB, over an hour on PostgreSQL, whose stores are slower); smaller sizes through
// the two variables.
for (const db of [undefined, ...(pgUrl?.startsWith("postgres") ? [pgUrl] : [])]) {
  log(`issue 32: many tenants, bulk loads: tenants.ts${db ? " on PostgreSQL" : ""}`);
  const many = (process.env.BENCH_TENANTS_MANY ?? "10000 20").split(" ");
  const bulk = (process.env.BENCH_TENANTS_BULK ?? "100000 1000000").split(" ");
  const p = Bun.spawnSync(
    [process.execPath, "run", join(import.meta.dir, "tenants.ts"), "many", ...many, "bulk", ...bulk],
    {
      cwd: root,
      stderr: "inherit",
      env: {
        ...process.env,
        ...(db ? { BENCH_TENANTS_DATABASE_URL: db } : today ? { BENCH_TENANTS_TODAY: today } : {}),
      },
    },
  );
  lines.push(p.exitCode === 0 ? p.stdout.toString() : `\n(bench/tenants.ts failed: exit ${p.exitCode})\n`);
}
// As-of reads (issue 23): bench/time.ts, also runnable alone.
lines.push(await timeBench(log));
// Consolidation without a model (issue 33): precision and recall of the merge rule on memd's
// labelled pairs, bench/consolidation.ts (also runnable alone; the bar: no false merge).
{
  log("consolidation: consolidation.ts");
  const p = Bun.spawnSync([process.execPath, "run", join(import.meta.dir, "consolidation.ts")], {
    cwd: root,
    stderr: "inherit",
  });
  lines.push(
    p.exitCode === 0
      ? p.stdout.toString()
      : `${p.stdout.toString()}\n(bench/consolidation.ts: a false merge, exit ${p.exitCode})\n`,
  );
}
// What bounds the figures (notes.md), and the search figures of bench/search.ts, which runs apart
// (search-results.md: it takes minutes and 2.3 GiB of its own).
for (const name of ["notes.md", "search-results.md"]) {
  const f = Bun.file(join(import.meta.dir, name));
  if (await f.exists()) lines.push(await f.text());
}
writeFileSync(join(import.meta.dir, "results.md"), lines.join("\n"));
rmSync(work, { recursive: true, force: true });
log("wrote bench/results.md");

// 6. The PostgreSQL rows (bench/postgres.ts: its own LMDB figures of the same run, ratios to
// them), on a throwaway PostgreSQL; it adds its section to bench/results.md.
log("PostgreSQL rows");
const pg = Bun.spawnSync(
  [join(root, "scripts/with-postgres"), process.execPath, "run", join(import.meta.dir, "postgres.ts")],
  { cwd: root, stdout: "inherit", stderr: "inherit" },
);
if (soak.passed !== soakRounds || pg.exitCode !== 0) process.exit(1);
