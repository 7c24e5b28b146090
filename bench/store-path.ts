// Issue 13's figure: server CPU per durable raw store and req/s at 64 connections, as ratios to
// the bare Bun.serve ceiling (bench/ceiling.ts) measured in the same run, alternating ceiling and
// memd each round; medians over the rounds. Server on CPU 0, wrk on CPU 1. `make bench` runs it
// for LMDB and PostgreSQL (bench/run.ts); alone:
//   bun run bench/store-path.ts [rounds] [--source] [--memd PATH]... [--database-url URL]
//     [--data-root DIR] [--secs N] [--unpinned] [--floor] [--entries N]...
// --memd (repeatable) compares several binaries in one run (e.g. before and after a change);
// --data-root puts the LMDB data dirs there (e.g. /dev/shm, to take a busy disk's fsync out of
// an A/B comparison of CPU work; the answers still wait for the flush). --database-url makes a
// fresh database per round on that server. --unpinned lets the servers (ceiling and memd alike)
// use both cores; wrk stays on CPU 1. --floor adds bench/store-floor.ts (HTTP and the LMDB
// apply with no app around them) as one more server of the comparison; --entries N
// (repeatable) adds its `--entries N` mode (HTTP and N durable LMDB entries per request).
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { createDatabase } from "../test/helpers";

const repo = join(import.meta.dir, "..");
const key = "memd_bench_root_key_0123456789abcdef";
const body = JSON.stringify({
  namespace: "bench",
  entity: "user-1",
  content: "The user prefers green tea in the morning",
  infer: false,
});
const ticks = 100; // USER_HZ

function cpuMs(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return ((Number(f[11]) + Number(f[12])) * 1000) / ticks;
}

/** Servers run on CPU 0 only, unless unpinned (both cores, shared with wrk on CPU 1). */
const serverCpus = (unpinned = false) => (unpinned ? "0,1" : "0");

async function start(cmd: string[], env: Record<string, string>, port: number, unpinned?: boolean) {
  const proc = Bun.spawn(["taskset", "-c", serverCpus(unpinned), ...cmd], {
    env: { PATH: process.env.PATH!, ...env },
    stdout: "ignore",
    stderr: "inherit",
  });
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 6000; i++) {
    if (proc.exitCode !== null) throw new Error(`server exited with ${proc.exitCode}`);
    try {
      if ((await fetch(`${url}/readyz`)).status === 200) return { proc, url };
    } catch {}
    await Bun.sleep(5);
  }
  throw new Error("server did not start");
}

function wrk(url: string, secs: number): { rps: number; requests: number } {
  const script = join(tmpdir(), `memd-wrk-${process.pid}.lua`);
  Bun.write(
    script,
    `wrk.method="POST"\nwrk.body=${JSON.stringify(body)}\nwrk.headers["Content-Type"]="application/json"\nwrk.headers["Authorization"]="Bearer ${key}"\n`,
  );
  const p = Bun.spawnSync(["taskset", "-c", "1", "wrk", "-t1", "-c64", `-d${secs}s`, "-s", script, url]);
  const out = p.stdout.toString();
  const rps = Number(/Requests\/sec:\s+([\d.]+)/.exec(out)?.[1]);
  const requests = Number(/(\d+) requests in/.exec(out)?.[1]);
  if (!(rps > 0) || /Non-2xx/.test(out))
    throw new Error(`wrk (exit ${p.exitCode}): ${`${out}\n${p.stderr.toString()}`.trim() || "no output"}`);
  return { rps, requests };
}

interface Figure {
  rps: number;
  cpuUs: number;
}

async function measure(
  cmd: string[],
  env: Record<string, string>,
  port: number,
  path: string,
  secs: number,
  unpinned?: boolean,
) {
  const s = await start(cmd, env, port, unpinned);
  try {
    wrk(`${s.url}${path}`, 1); // warm-up
    const before = cpuMs(s.proc.pid);
    const r = wrk(`${s.url}${path}`, secs);
    const cpuUs = ((cpuMs(s.proc.pid) - before) * 1000) / r.requests;
    return { rps: r.rps, cpuUs } satisfies Figure;
  } finally {
    s.proc.kill("SIGTERM");
    await s.proc.exited;
  }
}

export interface StorePathOptions {
  rounds?: number;
  secs?: number;
  /** Commands of the memd servers to compare, by label; default: dist/memd. */
  memd?: Record<string, string[]>;
  databaseUrl?: string;
  dataRoot?: string;
  /** The servers (ceiling and memd alike) may use both cores; wrk stays on CPU 1. */
  unpinned?: boolean;
  /** One line per round and server, as it is measured. */
  log?: (line: string) => void;
}

export interface StorePathRow {
  label: string;
  /** Medians over the rounds of memd's figure / the ceiling's figure of the same round. */
  cpuRatio: number;
  rpsRatio: number;
  /** Medians of the raw figures. */
  rps: number;
  cpuUs: number;
  ceilingRps: number;
  ceilingCpuUs: number;
  rounds: { cpuRatio: number; rpsRatio: number }[];
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

/** bench/store-floor.ts as a server of the comparison: HTTP and the LMDB apply, no app. */
export const floorCommand = [process.execPath, "run", join(import.meta.dir, "store-floor.ts")];
/** bench/store-floor.ts `--entries N`: HTTP and N durable, group-committed LMDB entries per request. */
export const entriesFloorCommand = (n: number) => [...floorCommand, "--entries", String(n)];

/** Measures every memd of `memd` against the ceiling, alternating within each round. */
export async function storePath(o: StorePathOptions = {}): Promise<StorePathRow[]> {
  const rounds = o.rounds ?? 3;
  const secs = o.secs ?? 5;
  const memd = o.memd ?? { memd: [join(repo, "dist/memd")] };
  const log = o.log ?? console.log;
  const missing = ["wrk", "taskset"].filter((tool) => !Bun.which(tool));
  if (missing.length > 0) throw new Error(`${missing.join(" and ")} not found on PATH: run \`make bench-deps\` first`);
  let port = 14000 + Math.floor(Math.random() * 4000);
  const ceilings: Figure[] = [];
  const figures: Record<string, Figure[]> = Object.fromEntries(Object.keys(memd).map((k) => [k, []]));
  for (let i = 0; i < rounds; i++) {
    const ceil = await measure(
      [process.execPath, "run", join(import.meta.dir, "ceiling.ts"), String(port)],
      {},
      port++,
      "/",
      secs,
      o.unpinned,
    );
    ceilings.push(ceil);
    log(`round ${i + 1}: ceiling ${ceil.rps.toFixed(0)} req/s ${ceil.cpuUs.toFixed(1)} µs/req`);
    for (const [label, cmd] of Object.entries(memd)) {
      const dir = mkdtempSync(join(o.dataRoot ?? tmpdir(), "memd-bench-"));
      const storage = o.databaseUrl ? ["--database-url", await createDatabase(o.databaseUrl)] : [];
      const m = await measure(
        [...cmd, "serve", "--port", String(port), "--data-dir", dir, ...storage],
        { MEMD_API_KEY: key, MEMD_LOG_LEVEL: "info" },
        port++,
        "/v1/memory",
        secs,
        o.unpinned,
      );
      rmSync(dir, { recursive: true, force: true });
      figures[label].push(m);
      log(
        `round ${i + 1}: ${label} ${m.rps.toFixed(0)} req/s ${m.cpuUs.toFixed(1)} µs/req; req/s ${((100 * m.rps) / ceil.rps).toFixed(0)}% of ceiling; CPU ${(m.cpuUs / ceil.cpuUs).toFixed(2)}× ceiling`,
      );
    }
  }
  return Object.entries(figures).map(([label, fs]) => {
    const per = fs.map((f, i) => ({ cpuRatio: f.cpuUs / ceilings[i].cpuUs, rpsRatio: f.rps / ceilings[i].rps }));
    return {
      label,
      cpuRatio: median(per.map((r) => r.cpuRatio)),
      rpsRatio: median(per.map((r) => r.rpsRatio)),
      rps: median(fs.map((f) => f.rps)),
      cpuUs: median(fs.map((f) => f.cpuUs)),
      ceilingRps: median(ceilings.map((c) => c.rps)),
      ceilingCpuUs: median(ceilings.map((c) => c.cpuUs)),
      rounds: per,
    };
  });
}

/** One line per row: the medians. */
export const describeRow = (r: StorePathRow) =>
  `${r.label}: median CPU ${r.cpuRatio.toFixed(2)}× ceiling, req/s ${(100 * r.rpsRatio).toFixed(0)}% of ceiling (${r.cpuUs.toFixed(1)} µs/req against ${r.ceilingCpuUs.toFixed(1)}; ${r.rps.toFixed(0)} against ${r.ceilingRps.toFixed(0)} req/s; rounds: ${r.rounds.map((x) => `${x.cpuRatio.toFixed(2)}×/${(100 * x.rpsRatio).toFixed(0)}%`).join(", ")})`;

if (import.meta.main) {
  const { values, positionals } = parseArgs({
    args: process.argv.slice(2),
    options: {
      source: { type: "boolean" },
      memd: { type: "string", multiple: true },
      floor: { type: "boolean" },
      entries: { type: "string", multiple: true },
      "database-url": { type: "string" },
      "data-root": { type: "string" },
      unpinned: { type: "boolean" },
      secs: { type: "string" },
    },
    allowPositionals: true,
  });
  const memd: Record<string, string[]> = {};
  if (values.source) memd.source = [process.execPath, "run", join(repo, "src/main.ts")];
  for (const path of values.memd ?? []) memd[path] = [path];
  if (values.floor) memd["floor (HTTP + LMDB apply, no app)"] = floorCommand;
  for (const n of values.entries ?? [])
    memd[`floor of ${n} entries (HTTP + ${n} durable LMDB entries)`] = entriesFloorCommand(Number(n));
  if (Object.keys(memd).length === 0) memd["dist/memd"] = [join(repo, "dist/memd")];
  const rows = await storePath({
    rounds: Number(positionals[0] ?? 3),
    secs: Number(values.secs ?? 5),
    memd,
    databaseUrl: values["database-url"],
    unpinned: values.unpinned,
    dataRoot: values["data-root"],
  });
  for (const r of rows) console.log(describeRow(r));
}
