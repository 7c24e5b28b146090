// Memory in time (issue 23): as-of list and entity-scoped as-of keyword search, p50/p99 over HTTP
// (one connection, requests one after another), for an entity with 10,000 events (ADD, MERGE,
// REPLACE, DELETE, mixed in time) in a store of 1,000,000 events. Each request asks for a random
// instant of that entity's history. Runs alone (`bun run bench/time.ts`, prints a Markdown
// section) and from bench/run.ts. BENCH_TIME_EVENTS changes the store's size; a PostgreSQL server
// in MEMD_BENCH_DATABASE_URL or MEMD_TEST_DATABASE_URL (scripts/with-postgres) adds its rows.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openStorage } from "../src/storage/index";
import type { MemoryOp } from "../src/storage/storage";
import { createDatabase } from "../test/helpers";

const root = join(import.meta.dir, "..");
const key = "memd_bench_root_key_0123456789abcdef";
const namespace = "bench";
const entity = "timeline";
const f0 = (n: number) => Math.round(n).toLocaleString("en-US");
const ms = (n: number) => `${n.toFixed(2)} ms`;
const percentile = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
};

/** A deterministic generator, so both backends get the same history. */
function seeded(seed: number) {
  let x = seed >>> 0;
  return () => {
    x = (x * 1664525 + 1013904223) >>> 0;
    return x / 2 ** 32;
  };
}

const words = ["tea", "coffee", "Paris", "Berlin", "cello", "running", "chess", "garden", "dog", "bike"];

/**
 * Loads `total` events: the timeline entity's `timeline` events (a mix of every state-changing
 * kind) spread evenly among ADDs of 1,000 other entities. Returns the timeline's first and last
 * event times.
 */
export async function load(settings: { dataDir: string; databaseUrl?: string }, total: number, timeline: number) {
  // A bulk load's statements may take longer than a request's (on a busy machine too).
  const storage = await openStorage({ ...settings, dbStatementTimeoutMs: 300_000 });
  const batch = settings.databaseUrl ? 2000 : 10_000;
  const rand = seeded(23);
  const live: string[] = [];
  let timelineLeft = timeline;
  let other = 0;
  const every = Math.max(1, Math.floor(total / timeline));
  const timelineOp = (): MemoryOp => {
    const r = rand();
    const content = `the user mentioned ${words[Math.floor(rand() * words.length)]} ${Math.floor(rand() * 1000)}`;
    const create = () => ({
      id: Bun.randomUUIDv7(),
      namespace,
      entity,
      content,
      category: "general",
      importance: Math.round(rand() * 100) / 100,
      tags: [words[Math.floor(rand() * words.length)]],
    });
    if (live.length < 50 || r < 0.35) {
      const c = create();
      live.push(c.id);
      return { event: "ADD", create: c };
    }
    const i = Math.floor(rand() * live.length);
    const target = live[i];
    if (r < 0.7) return { event: "MERGE", target, patch: { content: `${content}, merged` } };
    if (r < 0.85) {
      const c = create();
      live[i] = c.id;
      return { event: "REPLACE", create: c, target, reason: "contradiction" };
    }
    live.splice(i, 1);
    return { event: "DELETE", target, reason: "deleted" };
  };
  const t0 = performance.now();
  let written = 0;
  while (written < total) {
    const ops: MemoryOp[] = [];
    while (ops.length < batch && written + ops.length < total) {
      const n = written + ops.length;
      if (timelineLeft > 0 && n % every === 0) {
        ops.push(timelineOp());
        timelineLeft--;
      } else
        ops.push({
          event: "ADD",
          create: {
            id: Bun.randomUUIDv7(),
            // Other namespaces: each namespace's event clock takes one millisecond per event, so a
            // million events in one namespace, loaded in a minute, would stamp it 16 minutes
            // ahead of the wall clock, and an as-of read of that future is refused.
            namespace: `fill-${other % 10}`,
            entity: `user-${other % 1000}`,
            content: `memory ${other++}: the user prefers green tea in the morning`,
            category: "general",
            importance: 0.5,
          },
        });
    }
    await storage.apply(ops, null);
    written += ops.length;
  }
  const events = await storage.eventsAfter({ namespace, entity }, 0, timeline + 10);
  const stats = await storage.stats();
  await storage.close();
  // The timeline's own clock may run a little ahead of the wall clock: wait until it is not.
  await Bun.sleep(Math.max(0, events.at(-1)!.atMs - Date.now() + 10));
  return {
    seconds: (performance.now() - t0) / 1000,
    first: events[0].atMs,
    last: events.at(-1)!.atMs,
    timelineEvents: events.length,
    events: stats.events,
  };
}

async function startServer(args: string[], checkout = root) {
  const port = 20000 + Math.floor(Math.random() * 10000);
  const proc = Bun.spawn(
    [process.execPath, "run", join(checkout, "src/main.ts"), "serve", "--port", String(port), ...args],
    {
      env: { ...process.env, MEMD_API_KEY: key, MEMD_LOG_LEVEL: "warn", MEMD_DATABASE_URL: "" },
      stdout: "ignore",
      stderr: "inherit",
    },
  );
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 1200; i++) {
    try {
      if ((await fetch(`${url}/readyz`)).status === 200) return { proc, url };
    } catch {}
    await Bun.sleep(50);
  }
  proc.kill();
  throw new Error("server did not start");
}

/** p50/p99 of as-of list (a page of 100) and as-of keyword search, at random instants of the history. */
async function measure(url: string, first: number, last: number, requests: number) {
  const rand = seeded(7);
  const at = () => new Date(first + Math.floor(rand() * (last - first + 1))).toISOString();
  const headers = { authorization: `Bearer ${key}`, "content-type": "application/json" };
  const list: number[] = [];
  const search: number[] = [];
  // The same requests without asOf, in the same run: the baseline the as-of figures compare with.
  const nowList: number[] = [];
  const nowSearch: number[] = [];
  let listed = 0;
  let hits = 0;
  // A few first requests warm the caches, as a running server's are.
  for (let i = 0; i < requests + 10; i++) {
    const asOf = encodeURIComponent(at());
    let t0 = performance.now();
    const l = await fetch(`${url}/v1/memory?namespace=${namespace}&entity=${entity}&limit=100&asOf=${asOf}`, {
      headers,
    });
    const lb = (await l.json()) as { memories: unknown[] };
    if (l.status !== 200) throw new Error(`as-of list answered ${l.status}`);
    if (i >= 10) list.push(performance.now() - t0);
    listed += lb.memories.length;
    t0 = performance.now();
    const s = await fetch(`${url}/v1/memory/search`, {
      method: "POST",
      headers,
      body: JSON.stringify({
        namespace,
        entity,
        query: `${words[i % words.length]} mentioned`,
        mode: "keyword",
        asOf: decodeURIComponent(asOf),
      }),
    });
    const sb = (await s.json()) as { results: unknown[] };
    if (s.status !== 200) throw new Error(`as-of search answered ${s.status}`);
    if (i >= 10) search.push(performance.now() - t0);
    hits += sb.results.length;
    t0 = performance.now();
    await (
      await fetch(`${url}/v1/memory?namespace=${namespace}&entity=${entity}&limit=100`, { headers })
    ).arrayBuffer();
    if (i >= 10) nowList.push(performance.now() - t0);
    t0 = performance.now();
    await (
      await fetch(`${url}/v1/memory/search`, {
        method: "POST",
        headers,
        body: JSON.stringify({ namespace, entity, query: `${words[i % words.length]} mentioned`, mode: "keyword" }),
      })
    ).arrayBuffer();
    if (i >= 10) nowSearch.push(performance.now() - t0);
  }
  return { list, search, nowList, nowSearch, listed: listed / (requests + 10), hits: hits / (requests + 10) };
}

/** Every figure of the section, as Markdown. */
export async function timeBench(log: (s: string) => void = console.error): Promise<string> {
  const total = Number(process.env.BENCH_TIME_EVENTS ?? 1_000_000);
  const timeline = 10_000;
  const requests = Number(process.env.BENCH_TIME_REQUESTS ?? 300);
  const work = mkdtempSync(join(tmpdir(), "memd-bench-time-"));
  const rows: string[] = [];
  const backends: { name: string; settings: { dataDir: string; databaseUrl?: string }; args: string[] }[] = [];
  // BENCH_TIME_BACKENDS=lmdb or =postgres measures one of them.
  const only = process.env.BENCH_TIME_BACKENDS;
  if (only !== "postgres")
    backends.push({
      name: "LMDB",
      settings: { dataDir: join(work, "lmdb") },
      args: ["--data-dir", join(work, "lmdb")],
    });
  // A fresh database on the bench's PostgreSQL server (make bench runs inside scripts/with-postgres).
  const pgServer = process.env.MEMD_BENCH_DATABASE_URL ?? process.env.MEMD_TEST_DATABASE_URL;
  const pg = pgServer?.startsWith("postgres") && only !== "lmdb" ? await createDatabase(pgServer) : undefined;
  if (pg)
    backends.push({ name: "PostgreSQL", settings: { dataDir: "", databaseUrl: pg }, args: ["--database-url", pg] });
  try {
    for (const b of backends) {
      log(`time: loading ${f0(total)} events (${b.name})`);
      const loaded = await load(b.settings, total, timeline);
      log(`time: loaded in ${loaded.seconds.toFixed(0)} s; measuring`);
      const srv = await startServer(b.args);
      try {
        const m = await measure(srv.url, loaded.first, loaded.last, requests);
        const row = (what: string, xs: number[], per: string) =>
          `| ${b.name} | ${what} | ${ms(percentile(xs, 50))} | ${ms(percentile(xs, 99))} | ${per} |`;
        const ratio = (a: number[], b: number[]) => (percentile(a, 50) / percentile(b, 50)).toFixed(1);
        rows.push(
          row(
            "as-of list (page of 100)",
            m.list,
            `${m.listed.toFixed(0)} memories per page; p50 ${ratio(m.list, m.nowList)} x the current list's`,
          ),
          row("current list (page of 100), same run", m.nowList, "baseline"),
          row(
            "as-of keyword search (entity)",
            m.search,
            `${m.hits.toFixed(1)} hits per answer; p50 ${ratio(m.search, m.nowSearch)} x the current search's`,
          ),
          row("current keyword search (entity), same run", m.nowSearch, "baseline"),
        );
        log(`time: ${rows.slice(-2).join(" ")}`);
        rows.push(`| ${b.name} | (store) | | | ${f0(loaded.events)} events; the entity ${f0(loaded.timelineEvents)} |`);
      } finally {
        srv.proc.kill("SIGTERM");
        await srv.proc.exited;
      }
      // BENCH_TIME_BEFORE=<another checkout>: the same requests to its server on the same store,
      // for a before/after comparison in one run.
      const before = process.env.BENCH_TIME_BEFORE;
      if (before) {
        const old = await startServer(b.args, before);
        try {
          const m = await measure(old.url, loaded.first, loaded.last, requests);
          const ratio = (a: number[], c: number[]) => (percentile(a, 50) / percentile(c, 50)).toFixed(1);
          rows.push(
            `| ${b.name} | before: as-of list | ${ms(percentile(m.list, 50))} | ${ms(percentile(m.list, 99))} | p50 ${ratio(m.list, m.nowList)} x its current list's (${ms(percentile(m.nowList, 50))}) |`,
            `| ${b.name} | before: as-of keyword search | ${ms(percentile(m.search, 50))} | ${ms(percentile(m.search, 99))} | p50 ${ratio(m.search, m.nowSearch)} x its current search's (${ms(percentile(m.nowSearch, 50))}) |`,
          );
          log(`time: ${rows.slice(-2).join(" ")}`);
        } finally {
          old.proc.kill("SIGTERM");
          await old.proc.exited;
        }
      }
    }
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
  return [
    "## Memory in time (as of a moment)",
    "",
    `One connection, ${requests} requests of each kind at random instants of one entity's history (10,000 events: ADD, MERGE, REPLACE, DELETE mixed in time) in a store of ${f0(total)} events (the others in 10 namespaces of 1,000 entities); server and client share the machine. Targets: p50 < 20 ms, p99 < 100 ms.`,
    "",
    "| backend | request | p50 | p99 | |",
    "| --- | --- | --- | --- | --- |",
    ...rows,
    "",
  ].join("\n");
}

if (import.meta.main) console.log(await timeBench());
