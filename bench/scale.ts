// Keyword search at a million memories, measured from outside (issue 26): the compiled server
// (dist/memd) on a data dir of BENCH_SCALE_N memories (default 1,000,000) in one namespace.
//   - the first keyword search after a start (the namespace's lists built or read), twice:
//     after the load, and after a restart;
//   - warm keyword latency over HTTP, 1 caller (p50, p99);
//   - the server's anonymous memory (RssAnon) with keyword search warm on that namespace, and
//     again after 5,000 raw stores into it (which the lists follow);
//   - searches while the lists' snapshot is written after the first build (longest wait).
// A kept data dir (BENCH_SCALE_DIR) is reused: its keyword snapshots are deleted first, so the
// first round builds the lists from the records.
// `bun run bench/scale.ts` prints a Markdown section; make bench appends it to bench/results.md.
// The memories: 6-15 words drawn Zipf-like from 20,000 words over 1,000 entities, as bench/search.ts.
// `bun run bench/scale.ts load <dir> <n>` is the loader it runs in a child process.
//
// PostgreSQL mode (BENCH_SCALE_DATABASE_URL, a database to fill or reuse: it is loaded only when
// it holds fewer than N current memories in namespace `big`): two servers on that database, one
// searching by SQL (MEMD_PG_KEYWORD_LISTS=false) and one from its keyword lists in memory
// (postgres/keyword-cache.ts), the same queries on each in the same run: warm p50 / p99, the
// time until the lists are built (searches answered by SQL meanwhile), anonymous memory of each.
// The load is Storage.apply in process (the store path, events and memory_terms included).
import { existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openLmdb } from "../src/storage/lmdb/index";
import type { MemoryOp } from "../src/storage/storage";
import { seededRandom } from "../test/helpers";

const words = Array.from({ length: 20000 }, (_, i) => `w${i.toString(36)}`);
const zipfOf = (r: () => number) => () =>
  words[Math.min(words.length - 1, Math.floor(Math.exp(r() * Math.log(words.length)) - 1))];

if (process.argv[2] === "load") {
  const [dir, n] = [process.argv[3], Number(process.argv[4])];
  const rand = seededRandom(42);
  const zipf = zipfOf(rand);
  const s = await openLmdb(dir);
  let inFlight: Promise<unknown> = Promise.resolve();
  for (let i = 0; i < n; i += 10_000) {
    const ops: MemoryOp[] = [];
    for (let j = i; j < Math.min(n, i + 10_000); j++)
      ops.push({
        event: "ADD",
        create: {
          id: Bun.randomUUIDv7(),
          namespace: "big",
          entity: `e${j % 1000}`,
          content: Array.from({ length: 6 + Math.floor(rand() * 10) }, zipf).join(" "),
          category: "fact",
          importance: 0.5,
        },
      });
    await inFlight;
    inFlight = s.apply(ops, null);
  }
  await inFlight;
  await s.close();
  process.exit(0);
}

if (process.argv[2] === "loadpg") {
  const [url, n] = [process.argv[3], Number(process.argv[4])];
  const { openPostgres } = await import("../src/storage/postgres/index");
  const s = await openPostgres({ url, pool: 8, connectTimeoutMs: 10_000, statementTimeoutMs: 600_000 });
  const [{ have }] =
    await s.sql`SELECT count(*)::int AS have FROM memories WHERE namespace = 'big' AND state = 'current'`;
  const rand = seededRandom(42);
  const zipf = zipfOf(rand);
  const t = performance.now();
  const inFlight: Promise<unknown>[] = [];
  for (let i = 0; i < n; i += 2_000) {
    const ops: MemoryOp[] = [];
    for (let j = i; j < Math.min(n, i + 2_000); j++) {
      const content = Array.from({ length: 6 + Math.floor(rand() * 10) }, zipf).join(" ");
      if (j < have) continue; // (the same draws as a load from scratch: a reload continues it)
      ops.push({
        event: "ADD",
        create: {
          id: Bun.randomUUIDv7(),
          namespace: "big",
          entity: `e${j % 1000}`,
          content,
          category: "fact",
          importance: 0.5,
        },
      });
    }
    if (ops.length === 0) continue;
    // One transaction per call: a few in flight, so PostgreSQL and this process overlap.
    if (inFlight.length >= 3) await inFlight.shift();
    inFlight.push(s.apply(ops, null));
    if (i % 50_000 === 0)
      console.error(`[scale] loaded ${i.toLocaleString("en")} (${((performance.now() - t) / 1000).toFixed(0)} s)`);
  }
  await Promise.all(inFlight);
  await s.close();
  process.exit(0);
}

const N = Number(process.env.BENCH_SCALE_N ?? 1_000_000);
const root = join(import.meta.dir, "..");
const bin = process.env.BENCH_SCALE_BIN ?? join(root, "dist/memd");
const key = "memd_bench_root_key_0123456789abcdef";
const dir = process.env.BENCH_SCALE_DIR ?? mkdtempSync(join(tmpdir(), "memd-scale-"));
const log = (s: string) => console.error(`[scale] ${s}`);
const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
};

const t0 = performance.now();
if (
  !process.env.BENCH_SCALE_DATABASE_URL &&
  (!process.env.BENCH_SCALE_DIR || !(await Bun.file(join(dir, "data.mdb")).exists()))
) {
  log(`loading ${N} memories into ${dir}`);
  const p = Bun.spawnSync([process.execPath, "run", import.meta.path, "load", dir, String(N)], { stderr: "inherit" });
  if (p.exitCode !== 0) throw new Error("load failed");
}
const loadS = (performance.now() - t0) / 1000;

/** Waits (up to 120 s) for a server to answer /readyz with 200. */
async function ready(url: string) {
  for (const until = performance.now() + 120_000; performance.now() < until; await Bun.sleep(5)) {
    try {
      if ((await fetch(`${url}/readyz`)).status === 200) return;
    } catch {}
  }
  throw new Error("server never became ready");
}

let port = 13000 + Math.floor(Math.random() * 6000);
async function start() {
  const url = `http://127.0.0.1:${++port}`;
  const proc = Bun.spawn([bin, "serve", "--port", String(port), "--data-dir", dir], {
    env: { PATH: process.env.PATH!, MEMD_API_KEY: key, MEMD_LOG_LEVEL: "warn" },
    stdout: "ignore",
    stderr: "inherit",
  });
  await ready(url);
  return { proc, url };
}
const search = async (url: string, query: string, entity?: string) => {
  const r = await fetch(`${url}/v1/memory/search`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify({ namespace: "big", query, mode: "keyword", limit: 10, ...(entity ? { entity } : {}) }),
  });
  if (r.status !== 200) throw new Error(`search answered ${r.status}: ${await r.text()}`);
  return ((await r.json()) as { results: unknown[] }).results.length;
};
const anonMiB = async (pid: number) => {
  const status = await Bun.file(`/proc/${pid}/status`).text();
  return Number(/^RssAnon:\s+(\d+) kB/m.exec(status)?.[1] ?? 0) / 1024;
};

const databaseUrl = process.env.BENCH_SCALE_DATABASE_URL;
if (databaseUrl) {
  log(`loading up to ${N} memories into ${databaseUrl.replace(/\/\/[^@]*@/, "//")}`);
  const t1 = performance.now();
  const p = Bun.spawnSync([process.execPath, "run", import.meta.path, "loadpg", databaseUrl, String(N)], {
    stderr: "inherit",
  });
  if (p.exitCode !== 0) throw new Error("load failed");
  const loadPgS = (performance.now() - t1) / 1000;
  const startPg = async (lists: boolean) => {
    const url = `http://127.0.0.1:${++port}`;
    const proc = Bun.spawn(
      [
        bin,
        "serve",
        "--port",
        String(port),
        "--database-url",
        databaseUrl,
        "--data-dir",
        join(dir, String(port)),
        // (SQL over the most common words at 1,000,000 takes longer than the default 5 s.)
        "--db-statement-timeout-ms",
        "120000",
      ],
      {
        env: {
          PATH: process.env.PATH!,
          MEMD_API_KEY: key,
          MEMD_LOG_LEVEL: "warn",
          MEMD_PG_KEYWORD_LISTS: String(lists),
        },
        stdout: "ignore",
        stderr: "inherit",
      },
    );
    await ready(url);
    return { proc, url };
  };
  const built = async (url: string) => {
    const r = await fetch(`${url}/metrics`, { headers: { authorization: `Bearer ${key}` } });
    return /^memd_pg_keyword_namespaces 1$/m.test(await r.text());
  };
  const sqlServer = await startPg(false);
  const listServer = await startPg(true);
  const a = performance.now();
  await search(listServer.url, "w0 w1 w2");
  const firstMs = performance.now() - a;
  // Searches meanwhile are answered by SQL: timed, as the latency while the lists build.
  const during: number[] = [];
  while (!(await built(listServer.url))) {
    const b = performance.now();
    await search(listServer.url, "w3 w4 w5");
    during.push(performance.now() - b);
    await Bun.sleep(200);
  }
  const buildS = (performance.now() - a) / 1000;
  log(`lists built in ${buildS.toFixed(1)} s`);
  // The same queries on both servers, alternately (same load), 50 of warm-up each.
  const qword = zipfOf(seededRandom(7));
  const lat = { sql: [] as number[], lists: [] as number[] };
  const ent = { sql: [] as number[], lists: [] as number[] };
  let hits = 0;
  for (let i = 0; i < 550; i++) {
    const q = `${qword()} ${qword()} ${qword()}`;
    for (const [name, srv] of [
      ["sql", sqlServer],
      ["lists", listServer],
    ] as const) {
      const b = performance.now();
      const n = await search(srv.url, q);
      if (i >= 50) lat[name].push(performance.now() - b);
      if (name === "lists") hits += n;
      const c = performance.now();
      await search(srv.url, q, `e${i % 1000}`);
      if (i >= 50) ent[name].push(performance.now() - c);
    }
  }
  await Bun.sleep(1500);
  const anonSql = await anonMiB(sqlServer.proc.pid);
  const anonLists = await anonMiB(listServer.proc.pid);
  for (const s of [sqlServer, listServer]) s.proc.kill("SIGTERM");
  await Promise.all([sqlServer.proc.exited, listServer.proc.exited]);
  if (!process.env.BENCH_SCALE_DIR) rmSync(dir, { recursive: true, force: true });
  const ms = (x: number) => `${x.toFixed(2)} ms`;
  const [s50, s99, l50, l99] = [pct(lat.sql, 50), pct(lat.sql, 99), pct(lat.lists, 50), pct(lat.lists, 99)];
  console.log(`
## Keyword search at ${N.toLocaleString("en")} memories on PostgreSQL, from outside (bench/scale.ts, issue 26)

Two dist/memd servers on one PostgreSQL database of ${N.toLocaleString("en")} memories in one namespace (6-15 words drawn Zipf-like from 20,000 words, 1,000 entities; loaded through Storage.apply${loadPgS > 5 ? ` in ${loadPgS.toFixed(0)} s` : ", reused"}): one searching by SQL (\`MEMD_PG_KEYWORD_LISTS=false\`), one from its keyword lists in memory. The same queries over HTTP on each, alternately, 1 caller, 3 words drawn the same way, limit 10, 500 after 50 of warm-up (${(hits / 550).toFixed(1)} hits per query).

| figure | SQL (before) | lists in memory | ratio | target |
|---|---|---|---|---|
| warm keyword search, whole namespace, p50 | ${ms(s50)} | ${ms(l50)} | ${(s50 / l50).toFixed(1)}× faster | < 10 ms |
| warm keyword search, whole namespace, p99 | ${ms(s99)} | ${ms(l99)} | ${(s99 / l99).toFixed(1)}× faster | < 50 ms |
| warm keyword search, one entity (${(N / 1000).toLocaleString("en")} memories), p50 / p99 | ${ms(pct(ent.sql, 50))} / ${ms(pct(ent.sql, 99))} | ${ms(pct(ent.lists, 50))} / ${ms(pct(ent.lists, 99))} | ${(pct(ent.sql, 50) / pct(ent.lists, 50)).toFixed(1)}× at p50 | |
| server's anonymous memory (RssAnon) after the queries | ${anonSql.toFixed(0)} MiB | ${anonLists.toFixed(0)} MiB | | |

The lists server's first search took ${ms(firstMs)} (answered by SQL); its lists were built ${buildS.toFixed(1)} s after it, ${during.length} searches meanwhile answered by SQL (p50 ${during.length ? ms(pct(during, 50)) : "-"}).
`);
  process.exit(0);
}

if (process.env.BENCH_SCALE_PREBUILD) {
  // The namespace never searched: its snapshot written in the background (--keyword-prebuild,
  // on by default), then the first search after a restart. Requests to another namespace are
  // timed meanwhile (1 caller, one every 20 ms), and the server's anonymous memory before and after.
  rmSync(join(dir, "search"), { recursive: true, force: true });
  const files = () => (existsSync(join(dir, "search")) ? readdirSync(join(dir, "search")) : []);
  const s = await start();
  const idle = await anonMiB(s.proc.pid);
  const began = performance.now();
  const lat: number[] = [];
  let peak = idle;
  while (!files().some((f) => f.endsWith(".bin")) || files().some((f) => f.endsWith(".tmp"))) {
    if (performance.now() - began > 900_000) throw new Error("no background snapshot after 900 s");
    const b = performance.now();
    const r = await fetch(`${s.url}/v1/memory/search`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ namespace: "other", query: "w0 w1", mode: "keyword", limit: 10 }),
    });
    await r.arrayBuffer();
    lat.push(performance.now() - b);
    peak = Math.max(peak, await anonMiB(s.proc.pid));
    await Bun.sleep(20);
  }
  const builtS = (performance.now() - began) / 1000;
  await Bun.sleep(3000);
  const after = await anonMiB(s.proc.pid);
  await Bun.sleep(12_000);
  const later = await anonMiB(s.proc.pid);
  s.proc.kill("SIGTERM");
  await s.proc.exited;
  const r = await start();
  const a = performance.now();
  await search(r.url, "w0 w1 w2");
  const first = performance.now() - a;
  const b = performance.now();
  await search(r.url, "w3 w4 w5");
  const second = performance.now() - b;
  r.proc.kill("SIGTERM");
  await r.proc.exited;
  console.log(`
## Background keyword snapshot at ${N.toLocaleString("en")}+ memories (bench/scale.ts, BENCH_SCALE_PREBUILD)

dist/memd started on a data dir of ${N.toLocaleString("en")} memories in one namespace that has no snapshot and is never searched; its snapshot is written in the background (--keyword-prebuild), then the server is restarted and searched.

| figure | measured | target |
|---|---|---|
| from ready to the snapshot in place (nothing searched) | ${builtS.toFixed(1)} s | |
| requests to another namespace meanwhile (1 caller, every 20 ms): p50 / longest | ${lat.length}, ${pct(lat, 50).toFixed(2)} ms / ${Math.max(...lat).toFixed(2)} ms | not blocked |
| server's anonymous memory: idle / highest seen during the build / 3 s and 15 s after | ${idle.toFixed(0)} / ${peak.toFixed(0)} / ${after.toFixed(0)} / ${later.toFixed(0)} MiB | as idle (lists dropped) |
| first keyword search after the restart (snapshot read, caught up) | ${first.toFixed(2)} ms (next: ${second.toFixed(2)} ms) | ≤ 1 s |
`);
  process.exit(0);
}

const store = async (url: string, content: string) => {
  const r = await fetch(`${url}/v1/memory`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify({ namespace: "big", entity: "e1", content, infer: false }),
  });
  if (r.status !== 200) throw new Error(`store answered ${r.status}: ${await r.text()}`);
};
const snapshots = () => (existsSync(join(dir, "search")) ? readdirSync(join(dir, "search")) : []);

rmSync(join(dir, "search"), { recursive: true, force: true });
const firsts: number[] = [];
const warm: { p50: number; p99: number; hits: number }[] = [];
const anon: number[] = [];
const anonAfterStores: number[] = [];
let during = { n: 0, max: 0, p50: 0, ms: 0 };
for (let round = 0; round < 2; round++) {
  const s = await start();
  const a = performance.now();
  await search(s.url, "w0 w1 w2");
  firsts.push(performance.now() - a);
  if (round === 0) {
    // The snapshot is written behind the first build: searches meanwhile, until it is in place.
    const lat: number[] = [];
    const qword = zipfOf(seededRandom(3));
    const began = performance.now();
    while (!snapshots().some((f) => f.endsWith(".bin")) || snapshots().some((f) => f.endsWith(".tmp"))) {
      if (performance.now() - began > 120_000) throw new Error("no snapshot after 120 s");
      const b = performance.now();
      await search(s.url, `${qword()} ${qword()} ${qword()}`);
      lat.push(performance.now() - b);
    }
    during = { n: lat.length, max: Math.max(0, ...lat), p50: pct(lat, 50) ?? 0, ms: performance.now() - began };
  }
  const qword = zipfOf(seededRandom(7));
  const lat: number[] = [];
  let hits = 0;
  for (let i = 0; i < 550; i++) {
    const q = `${qword()} ${qword()} ${qword()}`;
    const b = performance.now();
    hits += await search(s.url, q);
    lat.push(performance.now() - b);
  }
  warm.push({ p50: pct(lat.slice(50), 50), p99: pct(lat.slice(50), 99), hits: hits / 550 });
  await Bun.sleep(1500); // a moment for the collector after the queries
  anon.push(await anonMiB(s.proc.pid));
  // 5,000 raw stores into the namespace (16 at a time), followed by its lists.
  const sword = zipfOf(seededRandom(100 + round));
  for (let i = 0; i < 5000; i += 16)
    await Promise.all(Array.from({ length: 16 }, () => store(s.url, Array.from({ length: 8 }, sword).join(" "))));
  await search(s.url, "w0 w1 w2");
  await Bun.sleep(1500);
  anonAfterStores.push(await anonMiB(s.proc.pid));
  s.proc.kill("SIGTERM");
  await s.proc.exited;
}
if (!process.env.BENCH_SCALE_DIR) rmSync(dir, { recursive: true, force: true });

const ms = (x: number) => `${x.toFixed(2)} ms`;
console.log(`
## Keyword search at ${N.toLocaleString("en")} memories, from outside (bench/scale.ts, issue 26)

dist/memd on a data dir of ${N.toLocaleString("en")} memories in one namespace (6-15 words drawn Zipf-like from 20,000 words, 1,000 entities; loaded through Storage.apply in ${loadS.toFixed(0)} s). Queries over HTTP, 1 caller, 3 words drawn the same way, limit 10, 500 after 50 of warm-up.

| figure | measured | target |
|---|---|---|
| first keyword search after the load (server just started) | ${ms(firsts[0])} | ≤ 1 s |
| first keyword search after a restart | ${ms(firsts[1])} | ≤ 1 s |
| warm keyword search, whole namespace, p50 / p99: lists built / read from the snapshot | ${ms(warm[0].p50)} / ${ms(warm[0].p99)}; ${ms(warm[1].p50)} / ${ms(warm[1].p99)} (${warm[0].hits.toFixed(1)} hits per query) | < 2 ms / < 20 ms |
| server's anonymous memory (RssAnon), keyword search warm: lists built / read from the snapshot | ${anon[0].toFixed(0)} MiB / ${anon[1].toFixed(0)} MiB (${((anon[0] * 1048576) / 1e6).toFixed(0)} / ${((anon[1] * 1048576) / 1e6).toFixed(0)} MB) | ≤ 300 MB |
| the same after 5,000 raw stores into the namespace | ${anonAfterStores[0].toFixed(0)} MiB / ${anonAfterStores[1].toFixed(0)} MiB (${((anonAfterStores[0] * 1048576) / 1e6).toFixed(0)} / ${((anonAfterStores[1] * 1048576) / 1e6).toFixed(0)} MB) | ≤ 300 MB |
| searches while the first snapshot is written (${(during.ms / 1000).toFixed(1)} s): p50 / longest | ${during.n} searches, ${ms(during.p50)} / ${ms(during.max)} | not blocked |
`);
