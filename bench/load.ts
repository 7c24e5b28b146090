// Bulk loader for the benchmarks: `bun run bench/load.ts <dataDir | postgres:// URL> <memories>`.
// Writes through the storage interface's `apply` (record, indexes, ADD event), 10,000 per
// transaction on LMDB (2,000 on PostgreSQL, whose bind parameters are limited to 65,535 per
// statement) instead of one per HTTP request, so 1,000,000 load in well under a minute.
// Adds two "hot" memories with 10 and 200 MERGE events, for events-by-memoryId answers.
import { openStorage } from "../src/storage/index";
import type { MemoryOp } from "../src/storage/storage";

const [dataDir, countArg] = process.argv.slice(2);
const count = Number(countArg);
const postgres = /^postgres(ql)?:\/\//.test(dataDir);
const storage = await openStorage(postgres ? { dataDir: "", databaseUrl: dataDir } : { dataDir });
const namespace = "bench";
const started = performance.now();
const batch = postgres ? 2_000 : 10_000;
const add = (entity: string, content: string): MemoryOp => ({
  event: "ADD",
  create: { id: Bun.randomUUIDv7(), namespace, entity, content, category: "general", importance: 0.5 },
});

for (let done = 0; done < count; done += batch) {
  const ops: MemoryOp[] = [];
  for (let i = done; i < Math.min(count, done + batch); i++)
    ops.push(add(`user-${i % 1000}`, `memory ${i}: the user prefers green tea in the morning`));
  await storage.apply(ops, null);
}
const hot: Record<string, string> = {};
for (const n of [10, 200]) {
  const first = add("hot", `hot memory with ${n} events`);
  const id = (first as { create: { id: string } }).create.id;
  const merges: MemoryOp[] = Array.from({ length: n - 1 }, () => ({
    event: "MERGE",
    target: id,
    patch: { content: `hot memory with ${n} events` },
  }));
  await storage.apply([first, ...merges], null);
  hot[n] = id;
}
// A `since` in the middle of the history, so diff scans start mid-range, not at an edge.
const [mid] = await storage.eventsAfter({ namespace }, 0, Math.floor(count / 2) + 1).then((e) => e.slice(-1));
await storage.close();
console.log(
  JSON.stringify({
    memories: count,
    seconds: (performance.now() - started) / 1000,
    hot,
    since: new Date(mid.atMs).toISOString(),
  }),
);
