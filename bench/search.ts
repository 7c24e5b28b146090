// Search quality and speed, at the storage interface (what POST /v1/memory/search runs, without
// HTTP): `bun run bench/search.ts` prints a Markdown section; `make bench` does not run it (it
// takes minutes on its own). Figures go into bench/search-results.md by hand, which make bench
// appends to bench/results.md.
//   1. quality on bench/search-set.json: recall@5 and MRR, keyword and hybrid (fake embedder)
//   2. keyword latency at BENCH_SEARCH_N memories (default 1,000,000), namespace and entity scope
//   3. semantic latency: an entity of 10,000 vectors, a namespace of 100,000 (768 dimensions)
//   4. apply throughput with the index on and off, same run; peak RSS
// BENCH_SEARCH_DATABASE_URL (a PostgreSQL server; a fresh database is made on it) runs the
// keyword part on PostgreSQL instead, e.g. BENCH_SEARCH_N=100000 BENCH_SEARCH_PARTS=keyword.
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fuse } from "../src/search/fusion";
import { PROBES, probeShare } from "../src/search/probe";
import { openLmdb } from "../src/storage/lmdb/index";
import { openPostgres } from "../src/storage/postgres/index";
import type { MemoryOp, Scored } from "../src/storage/storage";
import { indexTerms, queryTerms } from "../src/text/tokens";
import { canonicalizer, fakeVector } from "../test/fake-embedder";
import { createDatabase, seededRandom } from "../test/helpers";
import type { SearchSet } from "./search-set";

const N = Number(process.env.BENCH_SEARCH_N ?? 1_000_000);
/** BENCH_SEARCH_PARTS: a comma-separated subset of quality,keyword,semantic,throughput (default all). */
const parts = new Set((process.env.BENCH_SEARCH_PARTS ?? "quality,keyword,semantic,throughput").split(","));
const out: string[] = [];
const say = (s: string) => {
  out.push(s);
  console.log(s);
};
const dirs: string[] = [];
const tempStore = (o: { searchIndex?: boolean } = {}) => {
  const dir = mkdtempSync(join(tmpdir(), "memd-search-bench-"));
  dirs.push(dir);
  return openLmdb(dir, o);
};
const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
};
const ms = (x: number) => `${x.toFixed(2)} ms`;
const rand = seededRandom(42);

// 1. Quality
if (parts.has("quality")) {
  const set = JSON.parse(readFileSync(join(import.meta.dir, "search-set.json"), "utf8")) as SearchSet & {
    similar: string[][];
  };
  const opts = { dimensions: 256, similar: set.similar, trigrams: true };
  const canon = canonicalizer(set.similar);
  // What the server measures on its first hybrid search (src/search/probe.ts).
  const share = probeShare(PROBES.flat().map((t) => Float32Array.from(fakeVector(t, opts, canon))));
  const sharesContentWord = (query: string) => {
    const words = new Set(queryTerms(query).flatMap((t) => (t.weight === 1 ? [t.term] : [])));
    return (m: Scored["memory"]) => indexTerms(m.content).some((t) => words.has(t));
  };
  const s = await tempStore();
  const idOf = new Map<string, string>();
  const ops: MemoryOp[] = set.memories.map((m) => {
    const id = Bun.randomUUIDv7();
    idOf.set(id, m.id);
    return {
      event: "ADD",
      create: {
        id,
        namespace: "set",
        entity: m.entity,
        content: m.content,
        category: "fact",
        importance: 0.5,
        vector: fakeVector(m.content, opts, canon),
      },
    };
  });
  await s.apply(ops, null);
  const modes = ["keyword", "hybrid"] as const;
  const kinds = ["words", "paraphrase", "typo", "all"] as const;
  const table: Record<string, Record<string, { r5: number; mrr: number; n: number }>> = {};
  for (const mode of modes) {
    table[mode] = {};
    for (const k of kinds) table[mode][k] = { r5: 0, mrr: 0, n: 0 };
    for (const q of set.queries) {
      const scope = { namespace: "set", entity: q.entity };
      const k = await s.keywordSearch(scope, queryTerms(q.query), {}, 30);
      let hits: Scored[] = k.slice(0, 10);
      if (mode === "hybrid") {
        const v = await s.semanticSearch(scope, Float32Array.from(fakeVector(q.query, opts, canon)), {}, 30);
        hits = fuse(k, v, 10, { share, sharesContentWord: sharesContentWord(q.query) });
      }
      const ranked = hits.map((h) => idOf.get(h.memory.id)!);
      const rank = ranked.findIndex((id) => q.relevant.includes(id));
      for (const key of [q.kind, "all"]) {
        const c = table[mode][key];
        c.n++;
        if (rank >= 0 && rank < 5) c.r5++;
        if (rank >= 0) c.mrr += 1 / (rank + 1);
      }
    }
  }
  say(
    `## Search quality (bench/search-set.json: ${set.memories.length} memories, 20 entities, ${set.queries.length} queries)\n`,
  );
  say(
    "Each query is scoped to its entity; one relevant memory per query. Hybrid uses the fake embedder of test/fake-embedder.ts (bag of words with the set's synonym groups plus character trigrams, 256 dimensions).\n",
  );
  say("| mode | queries | recall@5 | MRR |");
  say("|---|---|---|---|");
  for (const mode of modes)
    for (const k of kinds) {
      const c = table[mode][k];
      say(`| ${mode} | ${k} (${c.n}) | ${((100 * c.r5) / c.n).toFixed(0)}% | ${(c.mrr / c.n).toFixed(3)} |`);
    }
  await s.close();
}

// 2. Keyword latency at N memories
const words = Array.from({ length: 20000 }, (_, i) => `w${i.toString(36)}`);
/** Zipf-like: word i is drawn with weight 1 / (i + 1). */
const zipfOf = (r: () => number) => () =>
  words[Math.min(words.length - 1, Math.floor(Math.exp(r() * Math.log(words.length)) - 1))];
const zipf = zipfOf(rand);
const sentence = () => Array.from({ length: 6 + Math.floor(rand() * 10) }, zipf).join(" ");
if (parts.has("keyword")) {
  // BENCH_SEARCH_DIR keeps the loaded store there, so later runs skip the load.
  const keep = process.env.BENCH_SEARCH_DIR;
  if (keep) mkdirSync(keep, { recursive: true });
  const pgUrl = process.env.BENCH_SEARCH_DATABASE_URL;
  const s = pgUrl
    ? await openPostgres({
        url: await createDatabase(pgUrl),
        pool: 10,
        connectTimeoutMs: 5000,
        statementTimeoutMs: 600_000,
      })
    : keep
      ? await openLmdb(keep)
      : await tempStore();
  const entities = 1000;
  const t0 = performance.now();
  // The bulk load: Storage.apply with 10,000 memories per transaction, each batch's df and
  // length counters summed once; the next batch is built while the previous one commits.
  const batch = 10_000;
  const loaded =
    s.backend === "lmdb" ? s.dbs.namespaceMemories.getKeysCount({ start: ["big"], end: ["big", "\uffff"] }) : 0;
  let inFlight: Promise<unknown> = Promise.resolve();
  for (let i = loaded; i < N; i += batch) {
    const ops: MemoryOp[] = [];
    for (let j = i; j < Math.min(N, i + batch); j++)
      ops.push({
        event: "ADD",
        create: {
          id: Bun.randomUUIDv7(),
          namespace: "big",
          entity: `e${j % entities}`,
          content: sentence(),
          category: "fact",
          importance: 0.5,
        },
      });
    await inFlight;
    inFlight = s.apply(ops, null);
    if ((i / batch) % 10 === 9)
      console.error(`loaded ${i + batch} in ${((performance.now() - t0) / 1000).toFixed(0)} s`);
  }
  await inFlight;
  const loadS = (performance.now() - t0) / 1000;
  // The load's garbage (a million op objects made in this process) is not what a server that
  // received its memories over time carries into its searches: collect it before measuring.
  Bun.gc(true);
  const Q = 1000;
  const run = (entity?: string) => {
    const lat: number[] = [];
    let found = 0;
    const qword = zipfOf(seededRandom(7)); // the same queries whatever was loaded in this run
    return (async () => {
      for (let i = 0; i < Q; i++) {
        const q = `${qword()} ${qword()} ${qword()}`;
        const a = performance.now();
        const r = await s.keywordSearch({ namespace: "big", entity }, queryTerms(q), {}, 10);
        lat.push(performance.now() - a);
        found += r.length;
      }
      return { p50: pct(lat.slice(50), 50), p99: pct(lat.slice(50), 99), found: found / Q, first: lat[0] };
    })();
  };
  // The first search of the namespace loads its lists (in slices: other work runs between them);
  // how long it took, and the longest the event loop was held meanwhile.
  let last = performance.now();
  let held = 0;
  const ticker = setInterval(() => {
    const t = performance.now();
    held = Math.max(held, t - last);
    last = t;
  }, 1);
  const b0 = performance.now();
  await s.keywordSearch({ namespace: "big" }, queryTerms("w0 w1 w2"), {}, 10);
  const build = performance.now() - b0;
  clearInterval(ticker);
  const ns = await run();
  const en = await run("e7");
  say(`\n## Keyword search at ${N.toLocaleString("en")} memories (${pgUrl ? "PostgreSQL" : "LMDB"}, 1 caller)\n`);
  say(
    `Namespace \`big\`: ${N.toLocaleString("en")} memories of 6–15 words drawn Zipf-like from 20,000 words, over 1,000 entities; loaded through Storage.apply (index on, 10,000 per transaction) in ${loaded ? "an earlier run" : `${loadS.toFixed(0)} s`}, then a full garbage collection. Queries: 3 words drawn the same way, limit 10, ${Q} queries (first 50 as warm-up).\n`,
  );
  say("| scope | p50 | p99 | hits per query | target |");
  say("|---|---|---|---|---|");
  say(`| whole namespace | ${ms(ns.p50)} | ${ms(ns.p99)} | ${ns.found.toFixed(1)} | p50 < 5 ms, p99 < 20 ms |`);
  say(
    `| one entity (${(N / entities).toLocaleString("en")} memories) | ${ms(en.p50)} | ${ms(en.p99)} | ${en.found.toFixed(1)} | p50 < 2 ms |`,
  );
  if (s.backend === "lmdb")
    say(
      `\nThe first search of the namespace in the process took ${ms(build)}: it builds the namespace's in-memory lists from the memories namespace_memories lists (their records tokenized), in slices; the event loop was never held longer than ${ms(held)} meanwhile, so other requests were served.`,
    );
  await s.close();
}

// 3. Semantic latency, 768 dimensions, instant embedder (the query vector is given)
if (parts.has("semantic")) {
  const s = await tempStore();
  const dims = 768;
  const vec = () => Float32Array.from({ length: dims }, () => rand() - 0.5);
  const load = async (namespace: string, entity: (i: number) => string, n: number) => {
    for (let i = 0; i < n; i += 2000) {
      const ops: MemoryOp[] = [];
      for (let j = i; j < Math.min(n, i + 2000); j++)
        ops.push({
          event: "ADD",
          create: {
            id: Bun.randomUUIDv7(),
            namespace,
            entity: entity(j),
            content: "v",
            category: "fact",
            importance: 0.5,
            vector: vec(),
          },
        });
      await s.apply(ops, null);
    }
  };
  await load("sem-e", () => "one", 10_000);
  await load("sem-n", (j) => `e${j % 100}`, 100_000);
  const time = async (scope: { namespace: string; entity?: string }) => {
    const lat: number[] = [];
    for (let i = 0; i < 40; i++) {
      const q = vec();
      const a = performance.now();
      await s.semanticSearch(scope, q, {}, 10);
      lat.push(performance.now() - a);
    }
    return { p50: pct(lat.slice(5), 50), first: lat[0] };
  };
  const e = await time({ namespace: "sem-e", entity: "one" });
  const n = await time({ namespace: "sem-n" });
  say(
    "\n## Semantic search (LMDB, 768 dimensions, query vector given; exact up to 800 vectors, beyond: binary codes and exact rescoring, bench/vectors.ts measures recall)\n",
  );
  say("| scope | p50 | first query of the namespace | target |");
  say("|---|---|---|---|");
  say(`| entity of 10,000 memories | ${ms(e.p50)} | ${ms(e.first)} | < 10 ms |`);
  say(`| namespace of 100,000 memories | ${ms(n.p50)} | ${ms(n.first)} | < 50 ms |`);
  await s.close();
}

// 4. Apply throughput, index on and off, same run: 64 concurrent single-memory stores, as 64
// connections of raw store make them (group commit shares the flushes).
if (parts.has("throughput")) {
  const measure = async (searchIndex: boolean) => {
    const s = await tempStore({ searchIndex });
    // With the index on, the namespace has been searched, so every commit also refreshes its
    // in-memory lists, as in a server that serves searches.
    if (searchIndex) await s.keywordSearch({ namespace: "tp" }, [{ term: "w0", weight: 1 }], {}, 10);
    let done = 0;
    const cpu0 = process.cpuUsage();
    const until = performance.now() + 5000;
    const worker = async () => {
      while (performance.now() < until) {
        await s.apply(
          [
            {
              event: "ADD",
              create: {
                id: Bun.randomUUIDv7(),
                namespace: "tp",
                entity: `e${done % 100}`,
                content: sentence(),
                category: "fact",
                importance: 0.5,
              },
            },
          ],
          null,
        );
        done++;
      }
    };
    await Promise.all(Array.from({ length: 64 }, worker));
    const cpu = process.cpuUsage(cpu0);
    await s.close();
    return { perS: done / 5, cpuUs: (cpu.user + cpu.system) / done };
  };
  const rounds = Number(process.env.BENCH_SEARCH_TP_ROUNDS ?? 5);
  const pairs: { perS: number; cpuUs: number }[][] = [];
  for (let i = 0; i < rounds; i++) pairs.push([await measure(false), await measure(true)]);
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  const col = (k: 0 | 1, f: "perS" | "cpuUs") => median(pairs.map((p) => p[k][f]));
  const ratio = median(pairs.map(([a, b]) => b.perS / a.perS));
  const cpuRatio = median(pairs.map(([a, b]) => a.cpuUs / b.cpuUs));
  say("\n## Store throughput with the keyword index on and off (same run)\n");
  say(
    `Storage.apply of one memory per call, 64 in flight, 5 s each, ${rounds} alternating off/on pairs; medians. With the index on, the namespace has been searched first, so each commit also refreshes its in-memory lists. This is the store path without HTTP; over HTTP the other costs are the same for both, so the HTTP ratio is at least this one.\n`,
  );
  say("| index | stores/s | CPU per store (process, all threads) |");
  say("|---|---|---|");
  say(`| off | ${col(0, "perS").toFixed(0)} | ${col(0, "cpuUs").toFixed(0)} µs |`);
  say(`| on | ${col(1, "perS").toFixed(0)} | ${col(1, "cpuUs").toFixed(0)} µs |`);
  say(
    `\nOn/off stores/s per pair: ${pairs.map(([a, b]) => `${((100 * b.perS) / a.perS).toFixed(0)}%`).join(", ")}; median ${(100 * ratio).toFixed(0)}% (target ≥ 80%). Off/on CPU per store per pair (the capacity ratio, less sensitive to the machine's other jobs): ${pairs.map(([a, b]) => `${((100 * a.cpuUs) / b.cpuUs).toFixed(0)}%`).join(", ")}; median ${(100 * cpuRatio).toFixed(0)}%.`,
  );
}

say(
  `\nPeak RSS of this run (the ${N.toLocaleString("en")}-memory load included): ${(process.resourceUsage().maxRSS / 1024).toFixed(0)} MiB.`,
);
for (const d of dirs) rmSync(d, { recursive: true, force: true });
