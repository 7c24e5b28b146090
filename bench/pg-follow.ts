// Issue 26, PostgreSQL: what one follower per namespace (src/storage/postgres/follow.ts) saves a
// keyword and a hybrid search, against another tree's code in the same run. In process, on one
// database: a writer replica stores one memory (with its vector) before each search, so every
// search follows one change; the replica of this tree and the other tree's answer alternately
// (which one goes first alternates too), both with their keyword lists and vectors built. A
// "hybrid" search is what rank() sends the storage (search/service.ts): the keyword search
// (FUSION.depth) and the semantic one (FUSION.semanticStatsDepth) at once. A second pass makes no
// write between searches (each follow finds nothing). Last, the database's CPU per store and
// search (every postgres process's, from /proc: PostgreSQL on this machine), in blocks of one
// replica's searches at a time.
//   BENCH_FOLLOW_DATABASE_URL=postgres://… BENCH_FOLLOW_OLD=/path/to/other/tree \
//     [BENCH_FOLLOW_N=100000] [BENCH_FOLLOW_Q=300] [BENCH_FOLLOW_DIMS=768] bun run bench/pg-follow.ts
// The database URL names a server; the bench makes a database of its own there and drops it.
import { readdirSync, readFileSync } from "node:fs";
import { SQL } from "bun";
import { FUSION } from "../src/search/fusion";
import { openPostgres, type PostgresStorage } from "../src/storage/postgres/index";
import type { MemoryOp } from "../src/storage/storage";
import { queryTerms } from "../src/text/tokens";
import { createDatabase, seededRandom } from "../test/helpers";
import { addOp, clustered } from "../test/search/clustered-vectors";

const server = process.env.BENCH_FOLLOW_DATABASE_URL!;
const oldTree = process.env.BENCH_FOLLOW_OLD!;
const N = Number(process.env.BENCH_FOLLOW_N ?? 100_000);
const Q = Number(process.env.BENCH_FOLLOW_Q ?? 300);
const dims = Number(process.env.BENCH_FOLLOW_DIMS ?? 768);
const ns = "follow";

const words = Array.from({ length: 20000 }, (_, i) => `w${i.toString(36)}`);
const zipfOf = (r: () => number) => () =>
  words[Math.min(words.length - 1, Math.floor(Math.exp(r() * Math.log(words.length)) - 1))];
const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
};

const url = await createDatabase(server);
const options = { url, pool: 8, connectTimeoutMs: 10_000, statementTimeoutMs: 600_000 };
const writer = await openPostgres(options);
const rand = seededRandom(42);
const zipf = zipfOf(rand);
const draw = clustered(7, dims);
const op = (j: number) => addOp(ns, j, Array.from({ length: 6 + Math.floor(rand() * 10) }, zipf).join(" "), draw());
const t0 = performance.now();
for (let i = 0; i < N; i += 2000) {
  const ops: MemoryOp[] = [];
  for (let j = i; j < Math.min(N, i + 2000); j++) ops.push(op(j));
  await writer.apply(ops, null);
}
await writer.sql`VACUUM ANALYZE`;
await writer.sql`CHECKPOINT`;
console.error(
  `[follow] loaded ${N} memories of ${dims} dimensions in ${((performance.now() - t0) / 1000).toFixed(0)} s`,
);

const { openPostgres: openOld } = (await import(`${oldTree}/src/storage/postgres/index.ts`)) as {
  openPostgres: typeof openPostgres;
};
const replicas = { new: await openPostgres(options), old: (await openOld(options)) as PostgresStorage };

// Each replica's lists and vectors built (their first searches build them in the background).
for (const [name, r] of Object.entries(replicas)) {
  const b = performance.now();
  for (;;) {
    await r.keywordSearch({ namespace: ns }, queryTerms("w0 w1"), {}, 10);
    await r.semanticSearch({ namespace: ns }, draw(), {}, 10);
    if (r.keywordLists!.isReady(ns) && (await r.vectors.ready(ns))) break;
    await Bun.sleep(200);
  }
  console.error(`[follow] ${name}: lists and vectors built in ${((performance.now() - b) / 1000).toFixed(1)} s`);
}

const qword = zipfOf(seededRandom(7));
const queries = Array.from({ length: Q + 30 }, () => ({ text: `${qword()} ${qword()} ${qword()}`, vector: draw() }));
type Name = keyof typeof replicas;
const keyword = (r: PostgresStorage, q: (typeof queries)[0]) =>
  r.keywordSearch({ namespace: ns }, queryTerms(q.text), {}, 10);
const hybrid = (r: PostgresStorage, q: (typeof queries)[0]) =>
  Promise.all([
    r.keywordSearch({ namespace: ns }, queryTerms(q.text), {}, FUSION.depth),
    r.semanticSearch({ namespace: ns }, q.vector, {}, Math.max(FUSION.depth, FUSION.semanticStatsDepth)),
  ]);

for (const writes of [true, false])
  for (const [kind, run] of [
    ["keyword", keyword],
    ["hybrid", hybrid],
  ] as const) {
    const ms: Record<Name, number[]> = { new: [], old: [] };
    const statements = replicas.new.followers.statements;
    for (const [i, q] of queries.entries()) {
      const order: Name[] = i % 2 ? ["new", "old"] : ["old", "new"];
      for (const name of order) {
        if (writes) await writer.apply([op(i)], null);
        const a = performance.now();
        await run(replicas[name], q);
        if (i >= 30) ms[name].push(performance.now() - a);
      }
    }
    const sent = (replicas.new.followers.statements - statements) / queries.length;
    const line = `${kind}, ${writes ? "one store before each search" : "no write between searches"}: p50 new ${pct(ms.new, 50).toFixed(2)} / old ${pct(ms.old, 50).toFixed(2)} ms (${(pct(ms.new, 50) / pct(ms.old, 50)).toFixed(2)}×), p99 new ${pct(ms.new, 99).toFixed(2)} / old ${pct(ms.old, 99).toFixed(2)} ms; follow statements per search (new) ${sent.toFixed(2)}`;
    console.log(line);
  }

// The database's CPU per search: every postgres process's CPU time over blocks of searches by one
// replica at a time (new, old, new, old), writes included (the same in both).
const pgCpuMs = () => {
  let ticks = 0;
  for (const pid of readdirSync("/proc")) {
    if (!/^\d+$/.test(pid)) continue;
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
      if (!stat.includes("(postgres)")) continue;
      const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      ticks += Number(f[11]) + Number(f[12]);
    } catch {}
  }
  return ticks * 10;
};
for (const [kind, run] of [
  ["keyword", keyword],
  ["hybrid", hybrid],
] as const) {
  const cpu: Record<Name, number> = { new: 0, old: 0 };
  for (const name of ["new", "old", "new", "old"] as Name[]) {
    const a = pgCpuMs();
    for (const q of queries) {
      await writer.apply([op(0)], null);
      await run(replicas[name], q);
    }
    cpu[name] += (pgCpuMs() - a) / (2 * queries.length);
  }
  const line = `${kind}, one store before each search: the database's CPU per store and search new ${cpu.new.toFixed(2)} / old ${cpu.old.toFixed(2)} ms (${(cpu.new / cpu.old).toFixed(2)}×)`;
  console.log(line);
}

await Promise.all([writer.close(), replicas.new.close(), replicas.old.close()]);
const admin = new SQL(server);
await admin.unsafe(`DROP DATABASE ${new URL(url).pathname.slice(1)}`);
await admin.close();
