// The PostgreSQL rows of the benchmarks, each as a ratio to the LMDB figure of the same run, and
// the LMDB raw store before and after the storage interface (commit 9842195 against this tree).
// `make bench-postgres` (or bench/run.ts at its end) runs it inside scripts/with-postgres, which
// gives it a throwaway PostgreSQL in MEMD_TEST_DATABASE_URL (or set MEMD_BENCH_DATABASE_URL).
// Writes the "PostgreSQL" section of bench/results.md.
//
// Every server runs from source (`bun run src/main.ts serve`) on CPU 0, wrk on CPU 1; PostgreSQL
// itself is not pinned. The 3-replica row gives its three processes the same CPU 0 as the one
// replica row: on this 2-core machine it measures the cost of several writers meeting on one
// namespace's clock row, not scale-out.
import { mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createDatabase } from "../test/helpers";
import { startWrk, type WrkResult, wrk } from "./wrk";

const root = join(import.meta.dir, "..");
const key = "memd_bench_root_key_0123456789abcdef";
const serverCpu = "0";
const loadCpu = "1";
const seconds = Number(process.env.BENCH_SECONDS ?? 5);
const readSecs = Math.max(2, Math.round(seconds * 0.6));
const events = Number(process.env.BENCH_PG_EVENTS ?? 100_000);
const beforeCommit = process.env.BENCH_BEFORE_COMMIT ?? "9842195";
const rounds = Number(process.env.BENCH_ROUNDS ?? 5);
if (!(rounds >= 1)) throw new Error("BENCH_ROUNDS must be at least 1");
const baseUrl = process.env.MEMD_BENCH_DATABASE_URL ?? process.env.MEMD_TEST_DATABASE_URL;
if (!baseUrl?.startsWith("postgres")) {
  console.error(
    `bench/postgres.ts needs a PostgreSQL: ${baseUrl ?? "run it in scripts/with-postgres (make bench-postgres) or set MEMD_BENCH_DATABASE_URL"}`,
  );
  process.exit(1);
}
const work = mkdtempSync(join(tmpdir(), "memd-bench-pg-"));
const started = performance.now();
const log = (s: string) => console.log(`[bench-pg ${((performance.now() - started) / 1000).toFixed(0)}s] ${s}`);
const wrkOpts = { key, cpu: loadCpu, secs: seconds };
const storeBody = {
  namespace: "bench",
  entity: "user-1",
  content: "the user prefers green tea in the morning",
  infer: false,
};

type Server = { proc: Bun.Subprocess; url: string };
let nextPort = 12000 + Math.floor(Math.random() * 8000);

/** Starts `bun run src/main.ts serve` from the tree `cwd`, pinned to the server CPU, and waits for /readyz. */
async function serve(cwd: string, args: string[]): Promise<Server> {
  const port = nextPort++;
  const proc = Bun.spawn(
    ["taskset", "-c", serverCpu, process.execPath, "run", "src/main.ts", "serve", "--port", String(port), ...args],
    {
      cwd,
      env: { PATH: process.env.PATH!, MEMD_API_KEY: key, MEMD_LOG_LEVEL: "warn" },
      stdout: "ignore",
      stderr: "inherit",
    },
  );
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    if (proc.exitCode !== null) throw new Error(`server in ${cwd} exited with ${proc.exitCode}`);
    try {
      if ((await fetch(`${url}/readyz`)).status === 200) return { proc, url };
    } catch {}
    await Bun.sleep(20);
  }
  throw new Error(`${url} never became ready`);
}

async function stop(...servers: Server[]) {
  for (const s of servers) s.proc.kill("SIGTERM");
  await Promise.all(servers.map((s) => s.proc.exited));
}

const freshDatabase = () => createDatabase(baseUrl!);

/** Raw store at 64 connections, after a 1 s warm-up; on several servers, the 64 connections split between them. */
async function rawStore(servers: Server[], script?: string): Promise<WrkResult> {
  const split = (i: number) => Math.floor(64 / servers.length) + (i < 64 % servers.length ? 1 : 0);
  await Promise.all(servers.map((s) => wrk(`${s.url}/v1/memory`, 8, { ...wrkOpts, secs: 1, body: storeBody })));
  const runs = servers.map((s, i) => startWrk(`${s.url}/v1/memory`, split(i), { ...wrkOpts, body: storeBody, script }));
  const results = await Promise.all(runs.map((r) => r.finish()));
  return {
    rps: results.reduce((n, r) => n + r.rps, 0),
    p50: Math.max(...results.map((r) => r.p50)),
    p99: Math.max(...results.map((r) => r.p99)),
    errors: results.reduce((n, r) => n + r.errors, 0),
  };
}

// Other work on this machine can slow any one run several-fold, so every figure is taken in
// `rounds` interleaved rounds (each round runs every variant once, on a fresh store) and the best
// round of each variant is reported: the least disturbed one. All rounds are listed.
const best = (rs: WrkResult[], by: "rps" | "p99") =>
  rs.reduce((a, b) => (by === "rps" ? (b.rps > a.rps ? b : a) : b.p99 < a.p99 ? b : a));

// The old tree from git (LMDB raw store before the storage interface), sharing this tree's
// node_modules: its dependencies are a subset.
const beforeTree = join(work, "before");
const archive = Bun.spawnSync(
  ["sh", "-c", `mkdir -p "${beforeTree}" && git archive ${beforeCommit} | tar -x -C "${beforeTree}"`],
  { cwd: root, stderr: "pipe" },
);
if (archive.exitCode !== 0) throw new Error(`git archive ${beforeCommit} failed: ${archive.stderr.toString()}`);
symlinkSync(join(root, "node_modules"), join(beforeTree, "node_modules"));
const pgArgs = (url: string) => ["--database-url", url, "--data-dir", join(work, "unused")];

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const f0 = (n: number) => Math.round(n).toLocaleString("en-US");

const allVariants = {
  before: async (i: number) => [await serve(beforeTree, ["--data-dir", join(work, `before-${i}`)])],
  lmdb: async (i: number) => [await serve(root, ["--data-dir", join(work, `lmdb-${i}`)])],
  pg1: async () => [await serve(root, pgArgs(await freshDatabase()))],
  pg3: async () => {
    const db = await freshDatabase();
    return Promise.all([0, 1, 2].map(() => serve(root, pgArgs(db))));
  },
  lmdbSpread: async (i: number) => [await serve(root, ["--data-dir", join(work, `lmdb-spread-${i}`)])],
  pg1Spread: async () => [await serve(root, pgArgs(await freshDatabase()))],
};
type Variant = keyof typeof allVariants;
const variants: Partial<typeof allVariants> = process.env.BENCH_BEFORE_AFTER_ONLY
  ? { before: allVariants.before, lmdb: allVariants.lmdb }
  : allVariants;
const stores = Object.fromEntries(Object.keys(allVariants).map((k) => [k, [] as WrkResult[]])) as Record<
  Variant,
  WrkResult[]
>;
for (let i = 0; i < rounds; i++) {
  log(`raw store, round ${i + 1} of ${rounds}`);
  for (const [name, start] of Object.entries(variants) as [Variant, (i: number) => Promise<Server[]>][]) {
    const servers = await start(i);
    stores[name].push(await rawStore(servers, name.endsWith("Spread") ? "post-spread.lua" : undefined));
    await stop(...servers);
  }
}
/** After / before in each round: the two ran back to back, so they met the same load. */
const paired = () => stores.lmdb.map((r, i) => r.rps / stores.before[i].rps);
if (process.env.BENCH_BEFORE_AFTER_ONLY) {
  // `BENCH_BEFORE_AFTER_ONLY=1 BENCH_ROUNDS=10 bun run bench/postgres.ts`: more rounds of the
  // interface check alone; prints, writes nothing.
  for (const v of ["before", "lmdb"] as const)
    console.log(
      `${v}: best ${f0(best(stores[v], "rps").rps)}, median ${f0(median(stores[v].map((r) => r.rps)))}, rounds ${stores[v].map((r) => f0(r.rps)).join(" / ")}`,
    );
  console.log(
    `after / before, per round: ${paired()
      .map((r) => r.toFixed(2))
      .join(" / ")}; median ${median(paired()).toFixed(2)}×`,
  );
  rmSync(work, { recursive: true, force: true });
  process.exit(0);
}
const [lmdbBefore, lmdbAfter, pg1, pg3, lmdbSpread, pg1Spread] = (
  ["before", "lmdb", "pg1", "pg3", "lmdbSpread", "pg1Spread"] as const
).map((v) => best(stores[v], "rps"));

// Diff and events, 200-event answers, 1 connection, at `events` stored events on each backend.
interface Loaded {
  hot: Record<string, string>;
  since: string;
  seconds: number;
}
function load(target: string): Loaded {
  const p = Bun.spawnSync([process.execPath, "run", join(import.meta.dir, "load.ts"), target, String(events)], {
    cwd: root,
    stderr: "inherit",
  });
  if (p.exitCode !== 0) throw new Error(`loading ${target} failed`);
  return JSON.parse(p.stdout.toString().trim().split("\n").at(-1)!);
}
const queries = ["diff", "events by namespace", "events by memoryId"] as const;
type Query = (typeof queries)[number];
const readRuns: Record<"lmdb" | "pg", Record<Query, WrkResult[]>> = {
  lmdb: { diff: [], "events by namespace": [], "events by memoryId": [] },
  pg: { diff: [], "events by namespace": [], "events by memoryId": [] },
};
async function reads(into: Record<Query, WrkResult[]>, args: string[], loaded: Loaded) {
  const s = await serve(root, args);
  const o = { ...wrkOpts, secs: readSecs };
  const diffBody = { namespace: "bench", since: loaded.since, limit: 200 };
  await wrk(`${s.url}/v1/memory/diff`, 1, { ...o, secs: 1, body: diffBody });
  into.diff.push(await wrk(`${s.url}/v1/memory/diff`, 1, { ...o, body: diffBody }));
  into["events by namespace"].push(await wrk(`${s.url}/v1/memory/events?namespace=bench&limit=200`, 1, o));
  into["events by memoryId"].push(await wrk(`${s.url}/v1/memory/events?memoryId=${loaded.hot[200]}&limit=200`, 1, o));
  await stop(s);
}
log(`loading ${events.toLocaleString("en-US")} events into LMDB and PostgreSQL`);
const lmdbDir = join(work, "lmdb-reads");
const lmdbLoaded = load(lmdbDir);
const readDb = await freshDatabase();
const pgLoaded = load(readDb);
for (let i = 0; i < rounds; i++) {
  log(`reads, round ${i + 1} of ${rounds}`);
  await reads(readRuns.lmdb, ["--data-dir", lmdbDir], lmdbLoaded);
  await reads(readRuns.pg, pgArgs(readDb), pgLoaded);
}
// The lowest p99 and the lowest p50 of the rounds (each from its least disturbed round).
const bestReads = (b: "lmdb" | "pg") =>
  Object.fromEntries(
    queries.map((q) => {
      const rs = readRuns[b][q];
      return [q, { ...best(rs, "p99"), p50: Math.min(...rs.map((r) => r.p50)) }];
    }),
  ) as Record<Query, WrkResult>;
const lmdbReads = bestReads("lmdb");
const pgReads = bestReads("pg");

// 4. The section of bench/results.md.
const ms = (n: number) => `${n.toFixed(2)} ms`;
const x = (a: number, b: number) => `${(a / b).toFixed(2)}×`;
const pgVersion = Bun.spawnSync(["sh", "-c", "postgres --version 2>/dev/null || ls /usr/lib/postgresql"])
  .stdout.toString()
  .trim()
  .split("\n")
  .at(-1);
const section = [
  "## PostgreSQL",
  "",
  `Written by bench/postgres.ts on ${new Date().toISOString()}; every ratio is to the LMDB figure of this same run. Servers from source on CPU ${serverCpu}, wrk on CPU ${loadCpu}, PostgreSQL ${pgVersion} unpinned on the same 2 cores (a throwaway server of scripts/with-postgres: fsync on, synchronous_commit on). Pool: MEMD_DB_POOL default (10). Runs of ${seconds} s (reads ${readSecs} s) after a 1 s warm-up. Every variant ran once in each of ${rounds} interleaved rounds, on a fresh store each time; the table shows its best round (highest req/s; for reads the lowest p99 and the lowest p50), since other work on this shared machine slows single runs several-fold. Every round is listed below the table.`,
  "",
  "| what | figure | ratio to LMDB | p50 | p99 | errors |",
  "|---|---|---|---|---|---|",
  `| raw store, 64 connections, LMDB | ${f0(lmdbAfter.rps)} req/s | 1.00× | ${ms(lmdbAfter.p50)} | ${ms(lmdbAfter.p99)} | ${lmdbAfter.errors} |`,
  `| raw store, 64 connections, PostgreSQL, 1 replica | ${f0(pg1.rps)} req/s | ${x(pg1.rps, lmdbAfter.rps)} | ${ms(pg1.p50)} | ${ms(pg1.p99)} | ${pg1.errors} |`,
  `| raw store, 64 connections, PostgreSQL, 3 replicas (sharing CPU ${serverCpu}; 21/21/22 connections) | ${f0(pg3.rps)} req/s | ${x(pg3.rps, lmdbAfter.rps)} | ${ms(pg3.p50)} | ${ms(pg3.p99)} | ${pg3.errors} |`,
  `| raw store, 64 connections over 64 namespaces, LMDB | ${f0(lmdbSpread.rps)} req/s | 1.00× | ${ms(lmdbSpread.p50)} | ${ms(lmdbSpread.p99)} | ${lmdbSpread.errors} |`,
  `| raw store, 64 connections over 64 namespaces, PostgreSQL, 1 replica | ${f0(pg1Spread.rps)} req/s | ${x(pg1Spread.rps, lmdbSpread.rps)} | ${ms(pg1Spread.p50)} | ${ms(pg1Spread.p99)} | ${pg1Spread.errors} |`,
  ...queries.map(
    (q) =>
      `| ${q}, 200-event answer, ${f0(events)} events, p99 (LMDB ${ms(lmdbReads[q].p99)}; p50 ${ms(pgReads[q].p50)} against LMDB ${ms(lmdbReads[q].p50)}, ${x(pgReads[q].p50, lmdbReads[q].p50)}) | ${ms(pgReads[q].p99)} | ${x(pgReads[q].p99, lmdbReads[q].p99)} | ${ms(pgReads[q].p50)} | ${ms(pgReads[q].p99)} | ${pgReads[q].errors} |`,
  ),
  "",
  `Raw store req/s in every round: ${(Object.keys(stores) as Variant[]).map((v) => `${v} ${stores[v].map((r) => f0(r.rps)).join(" / ")}`).join("; ")}. Read p99 in every round: ${queries.map((q) => `${q} LMDB ${readRuns.lmdb[q].map((r) => ms(r.p99)).join(" / ")}, PostgreSQL ${readRuns.pg[q].map((r) => ms(r.p99)).join(" / ")}`).join("; ")}.`,
  "",
  `Bulk load of ${f0(events)} memories through the storage interface: LMDB ${lmdbLoaded.seconds.toFixed(1)} s, PostgreSQL ${pgLoaded.seconds.toFixed(1)} s.`,
  "",
  "### LMDB raw store before and after the storage interface",
  "",
  `| tree | req/s at 64 connections, best of ${rounds} | every round |`,
  "|---|---|---|",
  `| ${beforeCommit} (before the interface) | ${f0(lmdbBefore.rps)} | ${stores.before.map((r) => f0(r.rps)).join(", ")} |`,
  `| this tree | ${f0(lmdbAfter.rps)} | ${stores.lmdb.map((r) => f0(r.rps)).join(", ")} |`,
  "",
  `After / before, per round (the two ran back to back, under the same load): ${paired()
    .map((r) => `${r.toFixed(2)}×`)
    .join(
      ", ",
    )}; median ${median(paired()).toFixed(2)}× (target: no more than a 10% drop, i.e. ≥ 0.90×): ${median(paired()) >= 0.9 ? "met" : "**missed**"}. Best against best: ${x(lmdbAfter.rps, lmdbBefore.rps)}.`,
  "",
].join("\n");

const resultsPath = join(import.meta.dir, "results.md");
const old = readFileSync(resultsPath, "utf8");
// Replace an earlier PostgreSQL section, or put it before the notes (## Why…) or at the end.
const start = old.indexOf("\n## PostgreSQL\n");
const end = start === -1 ? -1 : old.indexOf("\n## ", start + 1);
const notesAt = old.indexOf("\n## Why");
const updated =
  start !== -1
    ? `${old.slice(0, start + 1)}${section}${end === -1 ? "" : old.slice(end + 1)}`
    : notesAt !== -1
      ? `${old.slice(0, notesAt + 1)}${section}\n${old.slice(notesAt + 1)}`
      : `${old.trimEnd()}\n\n${section}`;
writeFileSync(resultsPath, updated);
rmSync(work, { recursive: true, force: true });
console.log(section);
log("wrote the PostgreSQL section of bench/results.md");
