// Approximate semantic search (src/index/vector/space.ts) on synthetic embeddings:
// recall@10 against exact cosine, latency, and memory per vector. `bun run bench/vectors.ts`
// prints a Markdown section. BENCH_VECTORS_N (default 1,000,000), BENCH_VECTORS_DIMS (768),
// BENCH_VECTORS_QUERIES (50). BENCH_VECTORS_STORE=1 goes through Storage (LMDB) end to end:
// the vectors are stored with Storage.apply and searched with Storage.semanticSearch (slower to
// load: the default measures the in-memory index over vectors held in this process, read by the
// exact scoring from memory instead of LMDB). In both, each query is searched two ways, in turn
// first: the codes' candidates ranked by the 4-bit copy and the best `exactReads(limit)` read
// exactly (the search), and every candidate read exactly (the path before the 4-bit copy:
// `lmdbVectors.exactOnly`, with the probe of then, BENCH_VECTORS_BASE_PROBE, default 8%), so the
// two are compared in the same run. The memory per vector is the
// index's (the anonymous memory the first search's build adds, after a full collection).
// BENCH_VECTORS_DATABASE_URL (a PostgreSQL server; a database is made on it and dropped) measures
// PostgreSQL's per-replica copy (src/storage/postgres/vector-cache.ts) through Storage: the
// vectors and their memory rows are written straight into the tables (INSERT of rows given as
// JSON, 5,000 a statement; not through apply or HTTP, which would take hours at 1,000,000), the
// copy is built by a first search and timed, and the old path that reads every vector of the
// namespace is measured in the same run (BENCH_VECTORS_OLD_QUERIES of them, default 10), as is
// reading 800 exact vectors by id (what rescoring from the database would cost).
// BENCH_VECTORS_READ_AB=1 alternates the final read in one statement and in 4 at once;
// BENCH_VECTORS_BASE_PROBE (PostgreSQL) also searches each query with that probe, same run.
//
// The data: real embeddings are far from uniform; they sit near a low-dimensional structure with
// a common offset. Here each vector is a point of a mixture of 1,000 Gaussian clusters in a 64-
// dimensional latent space, spread into `dims` dimensions by a sparse random map (each dimension
// the signed sum of 4 latent ones), plus a per-dimension offset and independent noise, then
// normalised. Queries are fresh draws from the same mixture (not stored vectors).
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SQL } from "bun";
import { dotKernel } from "../src/index/vector/dot";
import { exactReads, FourBit } from "../src/index/vector/four-bit";
import { ann, VectorSpace } from "../src/index/vector/space";
import { openLmdb } from "../src/storage/lmdb/index";
import { lmdbVectors } from "../src/storage/lmdb/search";
import { openPostgres } from "../src/storage/postgres/index";
import { memoryOf } from "../src/storage/postgres/rows";
import { approximateSearch, semanticSearch as readEverything } from "../src/storage/postgres/search";
import { pgVectors } from "../src/storage/postgres/vector-cache";
import type { MemoryOp } from "../src/storage/storage";

const N = Number(process.env.BENCH_VECTORS_N ?? 1_000_000);
const dims = Number(process.env.BENCH_VECTORS_DIMS ?? 768);
const Q = Number(process.env.BENCH_VECTORS_QUERIES ?? 50);
const viaStore = process.env.BENCH_VECTORS_STORE === "1";
const databaseUrl = process.env.BENCH_VECTORS_DATABASE_URL;
const oldQueries = Number(process.env.BENCH_VECTORS_OLD_QUERIES ?? 10);
if (process.env.BENCH_VECTORS_RESCORE) ann.rescore = Number(process.env.BENCH_VECTORS_RESCORE);
if (process.env.BENCH_VECTORS_PROBE) ann.probe = Number(process.env.BENCH_VECTORS_PROBE);
/** The share of the namespace the baseline (the path before the 4-bit copy) probes: before it, 8%. */
const baseProbe = Number(process.env.BENCH_VECTORS_BASE_PROBE ?? 0.08);
if (process.env.BENCH_VECTORS_CELLS) ann.cells = Number(process.env.BENCH_VECTORS_CELLS);
const K = 10;

let seed = 12345;
const rnd = () => {
  seed ^= seed << 13;
  seed ^= seed >>> 17;
  seed ^= seed << 5;
  return (seed >>> 0) / 4294967296;
};
const gauss = () => Math.sqrt(-2 * Math.log(rnd() + 1e-12)) * Math.cos(2 * Math.PI * rnd());
const L = 64;
const clusters = 1000;
const centres = Array.from({ length: clusters }, () => Float64Array.from({ length: L }, gauss));
const from = Int32Array.from({ length: dims * 4 }, () => Math.floor(rnd() * L));
const sign = Float64Array.from({ length: dims * 4 }, () => (rnd() < 0.5 ? -1 : 1));
const offset = Float64Array.from({ length: dims }, () => gauss() * 0.5);
const z = new Float64Array(L);
/** One draw into `out` (normalised); returns its cluster. */
const draw = (out: Float32Array) => {
  const k = Math.floor(rnd() * clusters);
  const c = centres[k];
  for (let t = 0; t < L; t++) z[t] = c[t] + 0.7 * gauss();
  let norm = 0;
  for (let j = 0; j < dims; j++) {
    let x = offset[j] + (rnd() - 0.5) * 1.2;
    for (let t = 0; t < 4; t++) x += sign[j * 4 + t] * z[from[j * 4 + t]] * 0.5;
    out[j] = x;
    norm += x * x;
  }
  norm = Math.sqrt(norm);
  for (let j = 0; j < dims; j++) out[j] /= norm;
  return k;
};

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
};

// The data set, in one WebAssembly memory (for the exact answers, by dot.ts's kernel).
const exact = dotKernel();
const rowBytes = dims * 4;
const dataAt = 65536;
const need = dataAt + N * rowBytes + N * 4;
exact.memory.grow(Math.ceil((need - exact.memory.buffer.byteLength) / 65536));
const t0 = performance.now();
const row = (r: number) => new Float32Array(exact.memory.buffer, dataAt + r * rowBytes, dims);
// Each row's entity: e0..e999 in turn (independent of its cluster), or with
// BENCH_VECTORS_ENTITIES=cluster its cluster's (an entity's memories share topics, as real ones
// do; LMDB loads a namespace in entity order, so its first vectors are then a few topics').
const byCluster = process.env.BENCH_VECTORS_ENTITIES === "cluster";
const entityOf = new Int32Array(N);
for (let r = 0; r < N; r++) {
  const k = draw(row(r));
  entityOf[r] = byCluster ? k : r % 1000;
}
const genS = (performance.now() - t0) / 1000;
console.error(`generated ${N} in ${genS.toFixed(0)} s`);
const queries = Array.from({ length: Q }, () => {
  const q = new Float32Array(dims);
  draw(q);
  return q;
});

/** The exact top K row numbers of q. */
const truth = (q: Float32Array): number[] => {
  new Float32Array(exact.memory.buffer, 0, dims).set(q);
  const out = dataAt + N * rowBytes;
  exact.dense(dataAt, 0, rowBytes, N, out);
  const s = new Float32Array(exact.memory.buffer, out, N);
  const best: number[] = [];
  for (let r = 0; r < N; r++) {
    if (best.length < K || s[r] > s[best[K - 1]]) {
      best.push(r);
      best.sort((a, b) => s[b] - s[a]);
      if (best.length > K) best.pop();
    }
  }
  return best;
};

/** This process's anonymous memory (heap, WebAssembly memories; not LMDB's mapped file), bytes. */
const anon = async () =>
  Number(/^RssAnon:\s+(\d+) kB/m.exec(await Bun.file("/proc/self/status").text())?.[1] ?? 0) * 1024;
const anon0 = await anon();
let memBase = anon0;
let search: (q: Float32Array) => Promise<string[]>;
/** The same search before the 4-bit copy (every candidate of the codes read exactly), when measured. */
let baseline: ((q: Float32Array) => Promise<string[]>) | undefined;
let loadS = 0;
let close = async () => {};
let space: VectorSpace | undefined;
/** Extra lines for the PostgreSQL section. */
const pgLines: string[] = [];
let split: (() => Promise<string>) | undefined;
if (databaseUrl) {
  const name = `memd_bench_vectors_${process.pid}`;
  const admin = new SQL(databaseUrl);
  await admin.unsafe(`CREATE DATABASE ${name}`);
  const url = databaseUrl.replace(/\/[^/?]*(\?|$)/, `/${name}$1`);
  const st = await openPostgres({ url, pool: 8, connectTimeoutMs: 5000, statementTimeoutMs: 600_000 });
  const idOf: string[] = [];
  const t1 = performance.now();
  const base = Date.now() - N;
  for (let i = 0; i < N; i += 5000) {
    const mem: unknown[] = [];
    const vec: unknown[] = [];
    for (let r = i; r < Math.min(N, i + 5000); r++) {
      const id = Bun.randomUUIDv7();
      idOf[r] = id;
      const entity = `e${entityOf[r]}`;
      mem.push({
        id,
        namespace: "vec",
        entity,
        content: "v",
        category: "fact",
        importance: 0.5,
        created_at: base + r,
        updated_at: base + r,
        state: "current",
      });
      const b = new Uint8Array(exact.memory.buffer, dataAt + r * rowBytes, rowBytes);
      vec.push({ memory_id: id, namespace: "vec", entity, vector: Buffer.from(b).toString("base64") });
    }
    await st.sql.unsafe(
      `WITH m AS (INSERT INTO memories (id, namespace, entity, content, category, importance, created_at, updated_at, state)
                  SELECT id, namespace, entity, content, category, importance, created_at, updated_at, state
                  FROM json_populate_recordset(NULL::memories, $1::text::json))
       INSERT INTO memory_vectors (memory_id, namespace, entity, vector)
       SELECT memory_id, namespace, entity, decode(vector, 'base64')
       FROM json_to_recordset($2::text::json) AS t(memory_id uuid, namespace text, entity text, vector text)`,
      [JSON.stringify(mem), JSON.stringify(vec)],
    );
  }
  await st.sql`INSERT INTO namespace_clock (namespace, last_ms) VALUES ('vec', ${base + N})`;
  await st.sql`VACUUM ANALYZE memories`;
  await st.sql`VACUUM ANALYZE memory_vectors`;
  // The load's dirty pages written now, not during the searches.
  await st.sql`CHECKPOINT`;
  loadS = (performance.now() - t1) / 1000;
  console.error(`loaded ${N} rows into PostgreSQL in ${loadS.toFixed(0)} s`);
  const rowOf = new Map(idOf.map((id, r) => [id, r]));
  const pgSearch = async (q: Float32Array) =>
    (await st.semanticSearch({ namespace: "vec" }, q, {}, K)).map((h) => String(rowOf.get(h.memory.id)));
  // The old path, same run: every vector of the namespace read per search (no copy built yet).
  const old: number[] = [];
  for (let i = 0; i < Math.min(oldQueries, Q); i++) {
    const a = performance.now();
    await readEverything(st.sql, { namespace: "vec" }, queries[i], {}, K, Date.now(), memoryOf);
    old.push(performance.now() - a);
  }
  // What rescoring 800 candidates from the database would cost: their exact vectors read by id.
  const byId: number[] = [];
  for (let i = 0; i < 10; i++) {
    const ids = Array.from({ length: 800 }, () => idOf[Math.floor(rnd() * N)]);
    const a = performance.now();
    await st.sql`SELECT memory_id, vector FROM memory_vectors WHERE memory_id = ANY(${st.sql.array(ids, "text")}::uuid[])`;
    byId.push(performance.now() - a);
  }
  Bun.gc(true);
  const before = await anon();
  memBase = before;
  const f0 = performance.now();
  await st.vectors.ready("vec");
  await st.vectors.loading("vec");
  const buildS = (performance.now() - f0) / 1000;
  console.error(`copy built in ${buildS.toFixed(1)} s`);
  Bun.gc(true);
  pgLines.push(
    `Old path (every vector of the namespace read per search), same run: p50 ${pct(old, 50).toFixed(1)} ms over ${old.length} searches. Reading 800 exact vectors by id: p50 ${pct(byId, 50).toFixed(1)} ms. Copy built by the first search in ${buildS.toFixed(1)} s; the memory column below is the process's growth from before the build.`,
  );
  search = pgSearch;
  // The probe of before, on the same queries (PostgreSQL ranked by the 4-bit copy already).
  if (process.env.BENCH_VECTORS_BASE_PROBE)
    baseline = async (q) => {
      const probe = ann.probe;
      ann.probe = baseProbe;
      try {
        return await pgSearch(q);
      } finally {
        ann.probe = probe;
      }
    };
  // Where a search's time goes (after the timed loop): the follow statement, and the codes and
  // 4-bit ranking in memory; the rest is the final statement and the checks.
  split = async () => {
    const follow: number[] = [];
    const codes: number[] = [];
    const approx: number[] = [];
    for (const q of queries) {
      const a = performance.now();
      const space = (await st.vectors.ready("vec"))!;
      const b = performance.now();
      space.nearest(undefined, q, ann.rescore);
      const c = performance.now();
      await approximateSearch(st.sql, space, { namespace: "vec" }, q, {}, K, Date.now(), memoryOf);
      follow.push(b - a);
      codes.push(c - b);
      approx.push(performance.now() - c);
    }
    return `Of a search (the same queries again): the follow statement p50 ${pct(follow, 50).toFixed(2)} ms; the codes and the 4-bit ranking in memory p50 ${pct(codes, 50).toFixed(2)} ms; those and the final statement (the best candidates' memory rows and exact vectors) p50 ${pct(approx, 50).toFixed(2)} ms.`;
  };
  close = async () => {
    await st.close();
    await admin.unsafe(`DROP DATABASE ${name}`);
    await admin.close();
  };
} else if (!viaStore) {
  const t1 = performance.now();
  space = new VectorSpace(
    (id) => new Uint8Array(exact.memory.buffer, dataAt + Number(id) * rowBytes, rowBytes),
    new FourBit(),
  );
  for (let r = 0; r < N; r++) space.set(String(r), `e${entityOf[r]}`, row(r));
  loadS = (performance.now() - t1) / 1000;
  const s = space;
  const best = (ids: string[], sims: Float32Array, k: number) =>
    [...ids.keys()]
      .sort((a, b) => sims[b] - sims[a])
      .slice(0, k)
      .map((i) => ids[i]);
  // As lmdb/search.ts does with every candidate passing: the 4-bit ranking's best read exactly.
  search = async (q) => {
    const near = s.nearest(undefined, q, Math.max(exactReads(K), ann.rescore));
    const ids = best(near.ids, near.sims, exactReads(K));
    return best(ids, s.score(ids, q), K);
  };
  baseline = async (q) => {
    const probe = ann.probe;
    ann.probe = baseProbe;
    try {
      const { ids, sims } = s.nearest(undefined, q, Math.max(K * 4 + 16, ann.rescore), true);
      return best(ids, sims, K);
    } finally {
      ann.probe = probe;
    }
  };
} else {
  const dir = mkdtempSync(join(tmpdir(), "memd-vectors-bench-"));
  const st = await openLmdb(dir);
  const idOf: string[] = [];
  const t1 = performance.now();
  let inFlight: Promise<unknown> = Promise.resolve();
  for (let i = 0; i < N; i += 5000) {
    const ops: MemoryOp[] = [];
    for (let r = i; r < Math.min(N, i + 5000); r++) {
      const id = Bun.randomUUIDv7();
      idOf[r] = id;
      ops.push({
        event: "ADD",
        create: {
          id,
          namespace: "vec",
          entity: `e${entityOf[r]}`,
          content: "v",
          category: "fact",
          importance: 0.5,
          vector: row(r).slice(),
        },
      });
    }
    await inFlight;
    inFlight = st.apply(ops, null);
  }
  await inFlight;
  const rowOf = new Map(idOf.map((id, r) => [id, r]));
  loadS = (performance.now() - t1) / 1000;
  search = async (q) =>
    (await st.semanticSearch({ namespace: "vec" }, q, {}, K)).map((h) => String(rowOf.get(h.memory.id)));
  baseline = async (q) => {
    const probe = ann.probe;
    lmdbVectors.exactOnly = true;
    ann.probe = baseProbe;
    try {
      return await search(q);
    } finally {
      lmdbVectors.exactOnly = false;
      ann.probe = probe;
    }
  };
  close = async () => {
    await st.close();
    rmSync(dir, { recursive: true, force: true });
  };
  Bun.gc(true);
  memBase = await anon();
  const f0 = performance.now();
  await search(queries[0]);
  console.error(`first search (loads the namespace's codes) ${(performance.now() - f0).toFixed(0)} ms`);
}
Bun.gc(true);
const anon1 = await anon();
const lat: number[] = [];
let hits = 0;
const baseLat: number[] = [];
let baseHits = 0;
// BENCH_VECTORS_READ_AB=1 (PostgreSQL): odd queries read their final candidates in one statement,
// even ones in 4 statements at once; both figures are printed.
const readAB = databaseUrl && process.env.BENCH_VECTORS_READ_AB === "1";
const readDefault = pgVectors.readParallel;
const parallel = readAB ? 4 : readDefault;
const byMode: Record<string, number[]> = { one: [], parallel: [] };
for (let i = 0; i < Q; i++) {
  if (readAB) pgVectors.readParallel = i % 2 ? 1 : parallel;
  const want = new Set(truth(queries[i]).map(String));
  // With a baseline, the two in turn first (each query's candidates' pages read by either).
  for (const isNew of baseline && i % 2 ? [false, true] : [true, false]) {
    if (!isNew && !baseline) continue;
    const run = isNew ? search : baseline!;
    const a = performance.now();
    const got = await run(queries[i]);
    (isNew ? lat : baseLat).push(performance.now() - a);
    for (const g of got) if (want.has(g)) isNew ? hits++ : baseHits++;
  }
  if (readAB) byMode[i % 2 ? "one" : "parallel"].push(lat.at(-1)!);
}
const recall = hits / (Q * K);
pgVectors.readParallel = readDefault;
if (readAB)
  pgLines.push(
    `Final candidates read in one statement (odd queries) against ${parallel} at once (even ones), same run: p50 ${pct(byMode.one, 50).toFixed(2)} against ${pct(byMode.parallel, 50).toFixed(2)} ms, p99 ${pct(byMode.one, 99).toFixed(2)} against ${pct(byMode.parallel, 99).toFixed(2)} ms.`,
  );
if (split) pgLines.push(await split());
const perVector = (anon1 - memBase) / N;
console.log(
  `\n## Semantic search at ${N.toLocaleString("en")} vectors of ${dims} dimensions (${databaseUrl ? "Storage over PostgreSQL: the replica's copy, exact vectors of the final candidates read with their memories" : viaStore ? "Storage over LMDB" : "in-memory index, vectors read from this process"})\n`,
);
console.log(
  `Codes ranked by Hamming distance, ${ann.cells} cells from ${ann.cellsFrom.toLocaleString("en")} vectors, probe ${(ann.probe * 100).toFixed(1)}% of the namespace, the best ${ann.rescore} ranked by the 4-bit copy and ${exactReads(K)} of them read exactly. ${Q} queries, limit ${K}; load ${loadS.toFixed(0)} s.\n`,
);
for (const line of pgLines) console.log(`${line}\n`);
console.log("| path | recall@10 vs exact | p50 | p99 | memory per vector (anonymous memory growth / N) |");
console.log("|---|---|---|---|---|");
console.log(
  `| 4-bit ranking, ${exactReads(K)} read exactly | ${recall.toFixed(3)} | ${pct(lat, 50).toFixed(2)} ms | ${pct(lat, 99).toFixed(2)} ms | ${perVector.toFixed(0)} B |`,
);
if (baseline)
  console.log(
    `| ${databaseUrl ? "" : "every candidate read exactly, "}probe ${(baseProbe * 100).toFixed(1)}% (before), same run | ${(baseHits / (Q * K)).toFixed(3)} | ${pct(baseLat, 50).toFixed(2)} ms | ${pct(baseLat, 99).toFixed(2)} ms | |`,
  );
await close();
