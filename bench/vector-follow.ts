// What following a namespace's vectors as it grows costs the store path (LMDB, issue 32): in
// process (Storage), BENCH_FOLLOW_N memories (default 50,000) stored with vectors of
// BENCH_FOLLOW_DIMS dimensions (default 768), 1,000 a call, into one namespace of a fresh data
// dir, with vector following off (keywordPrebuild 0) and on (1e9: vectors followed as memd serve
// with --keyword-prebuild follows them, keyword lists never built), alternately, BENCH_FOLLOW_ROUNDS
// rounds (default 2). CPU a store: the process's user + system CPU over the stores, the saves
// behind them included (the run waits for them); then the first semantic search after the load.
//   nice -n 10 bun run bench/vector-follow.ts
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openLmdb } from "../src/storage/lmdb/index";
import type { MemoryOp } from "../src/storage/storage";
import { addOp, clustered } from "../test/search/clustered-vectors";

const N = Number(process.env.BENCH_FOLLOW_N ?? 50_000);
const dims = Number(process.env.BENCH_FOLLOW_DIMS ?? 768);
const rounds = Number(process.env.BENCH_FOLLOW_ROUNDS ?? 2);
const ns = "grow";
const draw = clustered(13, dims);
// The same vectors for every run (drawn once), so that runs differ only in following.
const vectors = Array.from({ length: N }, () => draw());
const op = (j: number) => addOp(ns, j, `memory ${j}`, vectors[j]);

async function run(follow: boolean) {
  const dir = mkdtempSync(join(tmpdir(), "memd-bench-vector-follow-"));
  try {
    const s = await openLmdb(dir, { mapSizeMb: 16 * 1024, keywordPrebuild: follow ? 1e9 : 0 });
    Bun.gc(true);
    const cpu = process.cpuUsage();
    for (let i = 0; i < N; i += 1000) {
      const ops: MemoryOp[] = [];
      for (let j = i; j < Math.min(N, i + 1000); j++) ops.push(op(j));
      await s.apply(ops, null);
    }
    // The background load and saves the following started (if any) finish before the CPU is read.
    const quiet = async () => {
      for (let last = -1, same = 0; same < 5; ) {
        await Bun.sleep(200);
        const w = s.vectorCacheStats().written;
        same = w === last ? same + 1 : 0;
        last = w;
      }
    };
    await quiet();
    const used = process.cpuUsage(cpu);
    const perStore = (used.user + used.system) / N;
    const t = performance.now();
    await s.semanticSearch({ namespace: ns }, draw(), {}, 10);
    const first = performance.now() - t;
    const written = s.vectorCacheStats().written;
    await s.close();
    return { perStore, first, written };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const rows: string[] = [];
const ratios: number[] = [];
for (let r = 0; r < rounds; r++) {
  const off = await run(false);
  const on = await run(true);
  ratios.push(on.perStore / off.perStore);
  rows.push(
    `| ${r + 1} | ${off.perStore.toFixed(1)} µs | ${on.perStore.toFixed(1)} µs (${on.written} saves) | **${(on.perStore / off.perStore).toFixed(2)}×** | ${off.first.toFixed(0)} / ${on.first.toFixed(0)} ms |`,
  );
  console.error(rows.at(-1));
}
console.log(`
### Following a namespace's vectors as it grows (LMDB, issue 32)

${N.toLocaleString("en")} memories stored with vectors of ${dims} dimensions (Storage.apply, 1,000 a call, one namespace), in process; following off and on alternately (CPU of the process over the stores and the saves behind them).

| round | CPU a store, not followed | followed | ratio | first semantic search after the load, off / on |
|---|---|---|---|---|
${rows.join("\n")}
`);
process.exit(0);
