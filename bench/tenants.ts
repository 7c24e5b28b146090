// Many tenants against one, and a bulk load then one search (issue 32), measured from outside: a
// memd server (dist/memd, or the source with --source) on a fresh LMDB data dir (or a fresh
// database on the PostgreSQL server BENCH_TENANTS_DATABASE_URL), raw stores over HTTP as fast as
// it takes them.
//   many: N namespaces of M memories, each searched once (first searches), then again (warm),
//         then after a restart; against one namespace of N × M the same way, same run: load rate,
//         first / warm / after-restart keyword search p50 and p99, the server's anonymous memory
//         (RssAnon) after loading, after the first searches and after the restart's searches; and
//         with a search-memory budget (BENCH_TENANTS_BUDGET_MB, default 64): the same N
//         namespaces searched twice over, RssAnon, evictions and the searches' p99.
//   bulk: K memories into one namespace, then one keyword search: its time from the last store's
//         answer (and the store path's rate).
// `bun run bench/tenants.ts [many N M] [bulk K...] [--source]` prints a Markdown section (both
// cases at their defaults, 2,000 × 50 and 100,000, without arguments); make bench (bench/run.ts)
// runs it on LMDB and on PostgreSQL with bulk 100,000 and 1,000,000 and appends it to
// bench/results.md.
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createDatabase, seededRandom } from "../test/helpers";

const root = join(import.meta.dir, "..");
const key = "memd_bench_tenants_key_0123456789abcdef";
const args = process.argv.slice(2);
const fromSource = args.includes("--source");
const databaseUrl = process.env.BENCH_TENANTS_DATABASE_URL;
const budgetMb = Number(process.env.BENCH_TENANTS_BUDGET_MB ?? 64);
const inFlight = Number(process.env.BENCH_TENANTS_IN_FLIGHT ?? 32);

const words = Array.from({ length: 20000 }, (_, i) => `w${i.toString(36)}`);
const rand = seededRandom(7);
const zipf = () => words[Math.min(words.length - 1, Math.floor(Math.exp(rand() * Math.log(words.length)) - 1))];
const sentence = () => Array.from({ length: 6 + Math.floor(rand() * 10) }, zipf).join(" ");

type Server = { proc: Bun.Subprocess; url: string };
let nextPort = 20000 + Math.floor(Math.random() * 8000);

async function start(dataDir: string, env: Record<string, string> = {}): Promise<Server> {
  const port = nextPort++;
  const cmd = fromSource ? [process.execPath, "run", join(root, "src/main.ts")] : [join(root, "dist/memd")];
  const proc = Bun.spawn([...cmd, "serve", "--port", String(port), "--data-dir", dataDir], {
    // (Keyword figures: the built-in embedder, on by default, is off unless BENCH_TENANTS_EMBEDDER
    // names one: its background work would be counted in the stores' CPU.)
    env: {
      PATH: process.env.PATH!,
      MEMD_API_KEY: key,
      MEMD_LOG_LEVEL: "warn",
      MEMD_EMBEDDER: process.env.BENCH_TENANTS_EMBEDDER ?? "none",
      ...env,
    },
    stdout: "ignore",
    stderr: "inherit",
  });
  const url = `http://127.0.0.1:${port}`;
  for (const t0 = performance.now(); performance.now() - t0 < 120_000; await Bun.sleep(20)) {
    if (proc.exitCode !== null) throw new Error(`server exited with ${proc.exitCode}`);
    try {
      if ((await fetch(`${url}/readyz`)).status === 200) return { proc, url };
    } catch {}
  }
  throw new Error("server never became ready");
}

async function stop(s: Server) {
  s.proc.kill("SIGTERM");
  await s.proc.exited;
}

/** The server's CPU time so far (user + system), ms. */
const cpuMs = (s: Server) => {
  const stat = readFileSync(`/proc/${s.proc.pid}/stat`, "utf8");
  const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return ((Number(f[11]) + Number(f[12])) * 1000) / 100;
};

const anonMb = async (s: Server) => {
  const status = await Bun.file(`/proc/${s.proc.pid}/status`).text();
  return Number(/^RssAnon:\s+(\d+) kB/m.exec(status)?.[1] ?? 0) / 1024;
};

async function post(s: Server, path: string, body: unknown): Promise<unknown> {
  const res = await fetch(`${s.url}${path}`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  if (res.status !== 200) throw new Error(`${path} answered ${res.status}: ${await res.text()}`);
  return res.json();
}

/** Stores `n` memories over HTTP, `inFlight` at a time; namespaces by `nsOf(i)`. Returns stores/s. */
async function load(s: Server, n: number, nsOf: (i: number) => string): Promise<number> {
  const t0 = performance.now();
  let next = 0;
  const worker = async () => {
    for (let i = next++; i < n; i = next++)
      await post(s, "/v1/memory", { namespace: nsOf(i), entity: `e${i % 50}`, content: sentence(), infer: false });
  };
  await Promise.all(Array.from({ length: inFlight }, worker));
  return n / ((performance.now() - t0) / 1000);
}

const search = (s: Server, namespace: string, query: string) =>
  post(s, "/v1/memory/search", { namespace, query, limit: 10, mode: "keyword" });

/** Searches each namespace once, one at a time; latencies in ms, sorted. */
async function searchEach(s: Server, namespaces: string[]): Promise<number[]> {
  const times: number[] = [];
  for (const ns of namespaces) {
    const q = `${zipf()} ${zipf()} ${zipf()}`;
    const t0 = performance.now();
    await search(s, ns, q);
    times.push(performance.now() - t0);
  }
  return times.sort((a, b) => a - b);
}
const pct = (xs: number[], p: number) => xs[Math.min(xs.length - 1, Math.floor(xs.length * p))];
const ms = (x: number) => `${x.toFixed(2)} ms`;
const mb = (x: number) => `${x.toFixed(0)} MiB`;

async function metric(s: Server, name: string): Promise<number> {
  const text = await (await fetch(`${s.url}/metrics`, { headers: { authorization: `Bearer ${key}` } })).text();
  return Number(new RegExp(`^${name} ([\\d.e+-]+)$`, "m").exec(text)?.[1] ?? Number.NaN);
}

type Row = {
  label: string;
  rate: number;
  anonLoaded: number;
  first: number[];
  anonFirst: number;
  warm: number[];
  restart: number[];
  anonRestart: number;
};

/** A data dir (LMDB) and, with BENCH_TENANTS_DATABASE_URL (a server's URL), a fresh database on it. */
async function place(): Promise<{ dir: string; env: Record<string, string> }> {
  const dir = mkdtempSync(join(tmpdir(), "memd-tenants-"));
  return { dir, env: databaseUrl ? { MEMD_DATABASE_URL: await createDatabase(databaseUrl) } : {} };
}

async function tenantsRun(label: string, namespaces: string[], total: number, extra: Record<string, string>) {
  const { dir, env: where } = await place();
  const env = { ...where, ...extra };
  try {
    let s = await start(dir, env);
    const rate = await load(s, total, (i) => namespaces[i % namespaces.length]);
    await Bun.sleep(2000);
    const anonLoaded = await anonMb(s);
    const first = await searchEach(s, namespaces);
    await Bun.sleep(2000);
    const anonFirst = await anonMb(s);
    const warm = await searchEach(s, namespaces);
    await stop(s);
    s = await start(dir, env);
    const restart = await searchEach(s, namespaces);
    await Bun.sleep(2000);
    const anonRestart = await anonMb(s);
    await stop(s);
    return { label, rate, anonLoaded, first, anonFirst, warm, restart, anonRestart } satisfies Row;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * The namespaces loaded, then searched twice over in the same order under a budget that cannot
 * hold them all (so the second pass finds most of them released): RssAnon, evictions, p50/p99.
 */
async function budgetRun(namespaces: string[], total: number) {
  const { dir, env } = await place();
  try {
    const s = await start(dir, { ...env, MEMD_SEARCH_MEMORY_MB: String(budgetMb) });
    await load(s, total, (i) => namespaces[i % namespaces.length]);
    const first = await searchEach(s, namespaces);
    const again = await searchEach(s, namespaces);
    await Bun.sleep(2000);
    const out = {
      first,
      again,
      anon: await anonMb(s),
      held: (await metric(s, "memd_search_memory_held_bytes")) / 2 ** 20,
      evictions: await metric(s, "memd_search_memory_evictions_total"),
    };
    await stop(s);
    return out;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const lines: string[] = [];
const out = (s: string) => {
  lines.push(s);
  console.log(s);
};

const manyAt = args.indexOf("many");
const bulkAt = args.indexOf("bulk");
const doMany = manyAt >= 0 || bulkAt < 0;
const doBulk = bulkAt >= 0 || manyAt < 0;
out(
  `## Many tenants, bulk load then search (bench/tenants.ts, ${databaseUrl ? "PostgreSQL" : "LMDB"}, ${new Date().toISOString()})`,
);
out("");
if (doMany) {
  const n = Number(args[manyAt + 1] ?? 2000);
  const m = Number(args[manyAt + 2] ?? 50);
  const names = Array.from({ length: n }, (_, i) => `t${i}`);
  const rows = [
    await tenantsRun(`1 namespace of ${n * m}`, ["one"], n * m, {}),
    await tenantsRun(`${n} namespaces of ${m}`, names, n * m, {}),
  ];
  out(
    "| case | stores/s | RssAnon loaded / first searches / after restart | first p50 / p99 | warm p50 / p99 | after restart p50 / p99 |",
  );
  out("| --- | --- | --- | --- | --- | --- |");
  for (const r of rows)
    out(
      `| ${r.label} | ${r.rate.toFixed(0)} | ${mb(r.anonLoaded)} / ${mb(r.anonFirst)} / ${mb(r.anonRestart)} | ${ms(pct(r.first, 0.5))} / ${ms(pct(r.first, 0.99))} | ${ms(pct(r.warm, 0.5))} / ${ms(pct(r.warm, 0.99))} | ${ms(pct(r.restart, 0.5))} / ${ms(pct(r.restart, 0.99))} |`,
    );
  const [one, many] = rows;
  out("");
  out(
    `Anonymous memory after the first searches: ${n} namespaces ${(many.anonFirst / one.anonFirst).toFixed(2)}× one namespace of the same memories (after loading: ${(many.anonLoaded / one.anonLoaded).toFixed(2)}×; after the restart's searches: ${(many.anonRestart / one.anonRestart).toFixed(2)}×).`,
  );
  const b = await budgetRun(names, n * m);
  out(
    `With --search-memory-mb ${budgetMb}, the ${n} namespaces searched twice over: RssAnon ${mb(b.anon)} (${(b.anon / many.anonFirst).toFixed(2)}× without the budget's bound), ${mb(b.held)} held, ${b.evictions} evictions; second pass (namespaces brought back) p50 ${ms(pct(b.again, 0.5))} / p99 ${ms(pct(b.again, 0.99))}, first pass ${ms(pct(b.first, 0.5))} / ${ms(pct(b.first, 0.99))}.`,
  );
}
if (doBulk) {
  // Every number after "bulk" is a size (default 100,000).
  const sizes: number[] = [];
  for (let i = bulkAt + 1; i < args.length && /^\d+$/.test(args[i]); i++) sizes.push(Number(args[i]));
  for (const k of sizes.length > 0 ? sizes : [100_000]) {
    const { dir, env } = await place();
    try {
      const s = await start(dir, env);
      const cpu0 = cpuMs(s);
      const rate = await load(s, k, () => "bulk");
      const cpuPerStore = ((cpuMs(s) - cpu0) * 1000) / k;
      const t0 = performance.now();
      await search(s, "bulk", `${zipf()} ${zipf()} ${zipf()}`);
      const firstMs = performance.now() - t0;
      const warm = await searchEach(
        s,
        Array.from({ length: 200 }, () => "bulk"),
      );
      const anon = await anonMb(s);
      await stop(s);
      out("");
      out(
        `Bulk load of ${k} memories into one namespace at ${rate.toFixed(0)} stores/s (server CPU ${cpuPerStore.toFixed(0)} µs a store), then one keyword search: **${firstMs.toFixed(0)} ms** from the last store's answer (warm p50 ${ms(pct(warm, 0.5))}, ${(firstMs / pct(warm, 0.5)).toFixed(0)}× it); RssAnon ${mb(anon)}.`,
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }
}
export const tenantsLines = lines;
