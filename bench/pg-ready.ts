// Replicas ready at start on PostgreSQL (issue 32): a replica opened against a database holding a
// namespace of BENCH_READY_N memories (default 1,000,000), each with a vector of BENCH_READY_DIMS
// dimensions (default 256), searched from the moment it is ready. Same run, same database:
//   - base: a replica without search snapshots (--pg-snapshot-from 0): ready at once, its keyword
//     lists and vectors built on the namespace's first searches, SQL answering meanwhile;
//   - new: a replica that reads the snapshots another replica wrote (postgres/snapshots.ts) before
//     it is ready, then catches up (BENCH_READY_CHANGES stores, default 5,000, were made after
//     the snapshots were written).
// Each is opened in process (Storage, as the server uses it), its time to ready measured, then
// keyword and semantic searches alternate for BENCH_READY_SECS seconds (default 10): p50 and p99
// of each over that window, and when each first answered from memory. Each semantic search is
// followed by one that follows the namespace first (pgVectors.checkAtRead off: the search before
// its copy's freshness was checked in its own statement), so both are measured side by side.
// Prints a Markdown section.
//   BENCH_READY_DATABASE_URL=postgres://… (a server: a database of its own is made there; or run
//   in scripts/with-postgres) nice -n 10 flock /tmp/memd-bigbench.lock bun run bench/pg-ready.ts
// BENCH_READY_DB=postgres://…/db (a database of a server kept running) uses that database as it
// is: a second run skips the load (the namespace holds N memories already) and starts at the
// writer's searches.
import { SQL } from "bun";
import { openPostgres, type PostgresStorage } from "../src/storage/postgres/index";
import { pgVectors } from "../src/storage/postgres/vector-cache";
import type { MemoryOp } from "../src/storage/storage";
import { queryTerms } from "../src/text/tokens";
import { createDatabase, seededRandom } from "../test/helpers";
import { addOp, clustered } from "../test/search/clustered-vectors";

const kept = process.env.BENCH_READY_DB;
const server = kept ?? process.env.BENCH_READY_DATABASE_URL ?? process.env.MEMD_TEST_DATABASE_URL;
if (!server?.startsWith("postgres")) {
  console.error("bench/pg-ready.ts needs a PostgreSQL: BENCH_READY_DATABASE_URL, or run it in scripts/with-postgres");
  process.exit(1);
}
const N = Number(process.env.BENCH_READY_N ?? 1_000_000);
const dims = Number(process.env.BENCH_READY_DIMS ?? 256);
const changes = Number(process.env.BENCH_READY_CHANGES ?? 5_000);
const secs = Number(process.env.BENCH_READY_SECS ?? 10);
const ns = "big";
const started = performance.now();
const log = (s: string) => console.error(`[pg-ready ${((performance.now() - started) / 1000).toFixed(0)}s] ${s}`);

const words = Array.from({ length: 20000 }, (_, i) => `w${i.toString(36)}`);
const rand = seededRandom(42);
const zipf = () => words[Math.min(words.length - 1, Math.floor(Math.exp(rand() * Math.log(words.length)) - 1))];
const draw = clustered(7, dims);
const op = (j: number) => addOp(ns, j, Array.from({ length: 6 + Math.floor(rand() * 10) }, zipf).join(" "), draw());
const pct = (xs: number[], p: number) => {
  if (xs.length === 0) return Number.NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
};
const ms = (x: number) => (Number.isNaN(x) ? "–" : x < 10 ? x.toFixed(2) : x.toFixed(0));

const url = kept ?? (await createDatabase(server));
if (kept) {
  // A run before wrote the snapshots: gone, so that this run's writer writes them again.
  const sql = new SQL(url, { max: 1 });
  await sql`DELETE FROM search_snapshot_parts`.catch(() => undefined);
  await sql`DELETE FROM search_snapshots`.catch(() => undefined);
  await sql.close();
}
const open = (snapshotFrom: number) =>
  openPostgres({
    url,
    pool: 8,
    connectTimeoutMs: 10_000,
    statementTimeoutMs: 600_000,
    searchMemoryMb: 2048,
    snapshotFrom,
  });

// The load: Storage.apply, 2,000 memories a call, three calls in flight.
const writer = await open(10_000);
const [{ n: held }] = await writer.sql`SELECT count(*)::int AS n FROM memories WHERE namespace = ${ns}`;
if (held >= N) log(`the namespace holds ${held.toLocaleString("en")} memories already: not loaded again`);
else {
  const t = performance.now();
  const inFlight: Promise<unknown>[] = [];
  for (let i = 0; i < N; i += 2000) {
    const ops: MemoryOp[] = [];
    for (let j = i; j < Math.min(N, i + 2000); j++) ops.push(op(j));
    if (inFlight.length >= 3) await inFlight.shift();
    inFlight.push(writer.apply(ops, null));
    if (i % 100_000 === 0) log(`loaded ${i.toLocaleString("en")}`);
  }
  await Promise.all(inFlight);
  log(`loaded ${N.toLocaleString("en")} in ${((performance.now() - t) / 1000).toFixed(0)} s`);
}
// The writer builds both copies (its first searches) and writes their snapshots.
const built = { keyword: 0, vector: 0, written: 0 };
{
  const t = performance.now();
  await writer.keywordSearch({ namespace: ns }, queryTerms("w1 w2"), {}, 10);
  await writer.semanticSearch({ namespace: ns }, draw(), {}, 10);
  while (!writer.keywordLists!.isReady(ns) || writer.vectors.stats().namespaces === 0) {
    await Bun.sleep(100);
    if (!built.keyword && writer.keywordLists!.isReady(ns)) built.keyword = performance.now() - t;
    if (!built.vector && writer.vectors.stats().namespaces > 0) built.vector = performance.now() - t;
    await writer.keywordSearch({ namespace: ns }, queryTerms("w1"), {}, 10);
    await writer.semanticSearch({ namespace: ns }, draw(), {}, 10);
  }
  built.keyword ||= performance.now() - t;
  built.vector ||= performance.now() - t;
  while (writer.keywordLists!.snapshots.written < 1 || writer.vectors.snapshots.written < 1) await Bun.sleep(100);
  built.written = performance.now() - t;
  log(
    `writer: lists ${built.keyword.toFixed(0)} ms, vectors ${built.vector.toFixed(0)} ms, both written at ${built.written.toFixed(0)} ms`,
  );
}
const [size] =
  await writer.sql`SELECT sum(bytes)::bigint AS b, string_agg(kind || ' ' || bytes, ', ') AS each FROM search_snapshots`;
// The writer warm (its copies built and followed): the reference for what "from memory" answers.
const warm: Run = { ready: 0, kw: [], sem: [], semFollowing: [], read: 0 };
{
  const from = performance.now();
  while (performance.now() - from < secs * 1000) {
    let a = performance.now();
    await writer.keywordSearch({ namespace: ns }, queryTerms(`${zipf()} ${zipf()}`), {}, 10);
    warm.kw.push(performance.now() - a);
    a = performance.now();
    await writer.semanticSearch({ namespace: ns }, draw(), {}, 10);
    warm.sem.push(performance.now() - a);
    pgVectors.checkAtRead = false;
    a = performance.now();
    await writer.semanticSearch({ namespace: ns }, draw(), {}, 10);
    warm.semFollowing.push(performance.now() - a);
    pgVectors.checkAtRead = true;
  }
}
// Changes after the snapshots, which a replica reading them catches up with.
for (let i = 0; i < changes; i += 500) {
  const ops: MemoryOp[] = [];
  for (let j = i; j < Math.min(changes, i + 500); j++) ops.push(op(N + j));
  await writer.apply(ops, null);
}
await writer.close();

/** semFollowing: the semantic searches that followed the namespace first (see above). */
type Run = {
  ready: number;
  kw: number[];
  sem: number[];
  semFollowing: number[];
  kwFast?: number;
  semFast?: number;
  read: number;
};
/** Opens a replica, waits until it is ready, then searches for `secs` seconds. */
async function replica(snapshotFrom: number): Promise<Run> {
  const t = performance.now();
  const s: PostgresStorage = await open(snapshotFrom);
  while ((await s.notReadyReason()) !== undefined) await Bun.sleep(20);
  const ready = performance.now() - t;
  const run: Run = { ready, kw: [], sem: [], semFollowing: [], read: 0 };
  const from = performance.now();
  while (performance.now() - from < secs * 1000) {
    let a = performance.now();
    await s.keywordSearch({ namespace: ns }, queryTerms(`${zipf()} ${zipf()}`), {}, 10);
    const k = performance.now() - a;
    run.kw.push(k);
    if (run.kwFast === undefined && s.keywordLists!.isReady(ns)) run.kwFast = performance.now() - from;
    a = performance.now();
    await s.semanticSearch({ namespace: ns }, draw(), {}, 10);
    run.sem.push(performance.now() - a);
    if (run.semFast === undefined && s.vectors.stats().namespaces > 0) run.semFast = performance.now() - from;
    if (run.semFast !== undefined) {
      pgVectors.checkAtRead = false;
      a = performance.now();
      await s.semanticSearch({ namespace: ns }, draw(), {}, 10);
      run.semFollowing.push(performance.now() - a);
      pgVectors.checkAtRead = true;
    }
  }
  run.read = s.keywordLists!.snapshots.read + s.vectors.snapshots.read;
  await s.close();
  return run;
}
// (BENCH_READY_BASE=0 leaves the base out: at 1,000,000 its one semantic search by SQL takes a minute.)
const withBase = process.env.BENCH_READY_BASE !== "0";
if (withBase) log("base: a replica without snapshots");
const base = withBase ? await replica(0) : undefined;
log("new: a replica reading the snapshots");
const fresh = await replica(10_000);

const row = (name: string, r: Run) =>
  `| ${name} | ${(r.ready / 1000).toFixed(2)} s | ${ms(pct(r.kw, 50))} / ${ms(pct(r.kw, 99))} ms | ${ms(pct(r.sem, 50))} / ${ms(pct(r.sem, 99))} ms | ${ms(pct(r.semFollowing, 50))} / ${ms(pct(r.semFollowing, 99))} ms (${(pct(r.sem, 50) / pct(r.semFollowing, 50)).toFixed(2)}×) | ${r.kwFast === undefined ? `not within ${secs} s` : `${(r.kwFast / 1000).toFixed(1)} s`} | ${r.semFast === undefined ? `not within ${secs} s` : `${(r.semFast / 1000).toFixed(1)} s`} | ${r.kw.length} + ${r.sem.length} |`;
console.log(`
### Replicas ready at start (PostgreSQL, issue 32)

${N.toLocaleString("en")} memories in one namespace, vectors of ${dims} dimensions, ${changes.toLocaleString("en")} stores after the snapshots were written; searches in process (Storage) for the first ${secs} s after the replica is ready, keyword and semantic alternately (each semantic search then once more following the namespace first, as before this stop), one caller. Same run, same database. The writer built the lists in ${(built.keyword / 1000).toFixed(1)} s and the vectors in ${(built.vector / 1000).toFixed(1)} s, and had written both snapshots ${(built.written / 1000).toFixed(1)} s after its first search (${size.each} bytes).

| replica | time to ready | keyword p50 / p99 | semantic p50 / p99 | semantic following first, p50 / p99 (ratio of p50s) | keyword from memory after | semantic from memory after | searches |
|---|---|---|---|---|---|---|---|
| warm reference: the writer, its copies built | – | ${ms(pct(warm.kw, 50))} / ${ms(pct(warm.kw, 99))} ms | ${ms(pct(warm.sem, 50))} / ${ms(pct(warm.sem, 99))} ms | ${ms(pct(warm.semFollowing, 50))} / ${ms(pct(warm.semFollowing, 99))} ms (${(pct(warm.sem, 50) / pct(warm.semFollowing, 50)).toFixed(2)}×) | – | – | ${warm.kw.length} + ${warm.sem.length} |
${base ? row("base: no snapshots (built on first search)", base) : "| base: not run (BENCH_READY_BASE=0) | | | | | | | |"}
${row("new: snapshots read before ready", fresh)}

New against warm, p50: keyword ${(pct(fresh.kw, 50) / pct(warm.kw, 50)).toFixed(2)}×, semantic ${(pct(fresh.sem, 50) / pct(warm.sem, 50)).toFixed(2)}×. ${base ? `Keyword p50 new/base: ${(pct(fresh.kw, 50) / pct(base.kw, 50)).toFixed(3)}×; semantic p50 new/base: ${(pct(fresh.sem, 50) / pct(base.sem, 50)).toFixed(3)}×; time to ready new/base: ${(fresh.ready / base.ready).toFixed(1)}×.` : ""}
`);
process.exit(0);
