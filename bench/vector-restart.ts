// The first semantic search of a large namespace after a restart, LMDB (issue 32): in process
// (Storage), a data dir of BENCH_RESTART_N memories (default 1,000,000) in one namespace, each
// with a vector of BENCH_RESTART_DIMS dimensions (default 768). Same run:
//   - base: the first semantic search after the load reads and encodes every vector (the copy is
//     built from the store: what every first search after a start did before vector snapshots);
//   - new: after a restart, the first semantic search reads the namespace's vector snapshot
//     (storage/lmdb/vector-snapshot.ts, written behind the base's search) and catches up with
//     BENCH_RESTART_CHANGES stores made after it (default 5,000, with their vectors);
// then the warm p50 of 50 searches as the reference. Prints a Markdown section.
// BENCH_RESTART_DIR keeps the data dir: a second run with it skips the load (and the base) and
// times the restart again (nothing saved since, so the same catching up).
//   nice -n 10 flock /tmp/memd-bigbench.lock bun run bench/vector-restart.ts
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openLmdb } from "../src/storage/lmdb/index";
import { vectorSnapshots } from "../src/storage/lmdb/vector-cache";
import type { MemoryOp } from "../src/storage/storage";
import { addOp, clustered } from "../test/search/clustered-vectors";

const N = Number(process.env.BENCH_RESTART_N ?? 1_000_000);
const dims = Number(process.env.BENCH_RESTART_DIMS ?? 768);
const changes = Number(process.env.BENCH_RESTART_CHANGES ?? 5_000);
const ns = "big";
const started = performance.now();
const log = (s: string) => console.error(`[vector-restart ${((performance.now() - started) / 1000).toFixed(0)}s] ${s}`);
const draw = clustered(11, dims);
const op = (j: number) => addOp(ns, j, `memory ${j}`, draw());
const pct = (xs: number[], p: number) =>
  [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))];

const kept = process.env.BENCH_RESTART_DIR;
if (kept) mkdirSync(kept, { recursive: true });
const dir = kept ?? mkdtempSync(join(tmpdir(), "memd-bench-vector-restart-"));
const again = kept !== undefined && existsSync(join(dir, "bench-loaded"));
let base = Number.NaN;
let written = Number.NaN;
try {
  let s = await openLmdb(dir, { mapSizeMb: 64 * 1024 });
  if (!again) {
    let t = performance.now();
    let inFlight: Promise<unknown> = Promise.resolve();
    for (let i = 0; i < N; i += 5000) {
      const ops: MemoryOp[] = [];
      for (let j = i; j < Math.min(N, i + 5000); j++) ops.push(op(j));
      await inFlight;
      inFlight = s.apply(ops, null);
      if (i % 100_000 === 0) log(`loaded ${i.toLocaleString("en")}`);
    }
    await inFlight;
    log(`loaded ${N.toLocaleString("en")} in ${((performance.now() - t) / 1000).toFixed(0)} s`);
    // Base: the first search builds the copy from every vector.
    t = performance.now();
    await s.semanticSearch({ namespace: ns }, draw(), {}, 10);
    base = performance.now() - t;
    log(`base first search ${base.toFixed(0)} ms`);
    t = performance.now();
    while (s.vectorCacheStats().written < 1) await Bun.sleep(100);
    written = performance.now() - t;
    log(`snapshot written ${written.toFixed(0)} ms after`);
  }
  // Changes after the snapshot (no save again before the restart: the restart catches up).
  vectorSnapshots.from = Number.POSITIVE_INFINITY;
  if (!again)
    for (let i = 0; i < changes; i += 1000) {
      const ops: MemoryOp[] = [];
      for (let j = i; j < Math.min(changes, i + 1000); j++) ops.push(op(N + j));
      await s.apply(ops, null);
    }
  await s.close();
  if (kept) writeFileSync(join(dir, "bench-loaded"), "");
  s = await openLmdb(dir, { mapSizeMb: 64 * 1024 });
  let t = performance.now();
  await s.semanticSearch({ namespace: ns }, draw(), {}, 10);
  const fresh = performance.now() - t;
  const read = s.vectorCacheStats().read;
  log(`new first search ${fresh.toFixed(0)} ms (snapshots read: ${read})`);
  const warm: number[] = [];
  for (let i = 0; i < 50; i++) {
    t = performance.now();
    await s.semanticSearch({ namespace: ns }, draw(), {}, 10);
    warm.push(performance.now() - t);
  }
  await s.close();
  console.log(`
### The first semantic search after a restart (LMDB, issue 32)

${N.toLocaleString("en")} memories in one namespace, vectors of ${dims} dimensions, in process (Storage), same run. Base: the first search after the load built the copy from every vector (what every first search after a start did before). New: after a restart, the first search read the vector snapshot written behind the base's search (${(written / 1000).toFixed(1)} s after it) and caught up with ${changes.toLocaleString("en")} stores made after it.

| first semantic search | time |
|---|---|
| base: built from every vector | ${(base / 1000).toFixed(2)} s |
| new: after a restart, snapshot read (${read}) and caught up | ${(fresh / 1000).toFixed(2)} s (${(fresh / base).toFixed(3)}× base) |
| warm p50 / p99 after it (50 searches) | ${pct(warm, 50).toFixed(2)} / ${pct(warm, 99).toFixed(2)} ms |
`);
} finally {
  if (!kept) rmSync(dir, { recursive: true, force: true });
}
process.exit(0);
