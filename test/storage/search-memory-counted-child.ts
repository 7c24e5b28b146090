// Child of search-memory-counted.test.ts: measures in a process of its own, so that the heap
// holds nothing of other test files. Prints one JSON line: per state, the bytes the budget counted
// for the namespaces held and the heap a full collection freed when they were let go.
import { heapStats } from "bun:jsc";
import { openStorage } from "../../src/storage/index";
import type { PostgresStorage } from "../../src/storage/postgres/index";

const [url, count] = process.argv.slice(2);
const n = Number(count);

const heap = () => {
  Bun.gc(true);
  Bun.gc(true);
  return heapStats().heapSize;
};

const open = async () => (await openStorage({ dataDir: "/nonexistent", databaseUrl: url })) as PostgresStorage;

const measure = async (s: PostgresStorage) => {
  const held = s.keywordLists!.stats().namespaces;
  const counted = (await s.stats()).gauges.memd_search_memory_held_bytes[1];
  const before = heap();
  s.keywordLists!.close();
  const freed = before - heap();
  const after = (await s.stats()).gauges.memd_search_memory_held_bytes[1];
  await s.close();
  return { held, counted, freed, after };
};

// Built (in the background after a namespace's first search, answered by SQL) and not searched since.
const first = await open();
for (let i = 0; i < n; i++) await first.keywordLists!.load(`ns${i}`);
const built = await measure(first);
// Built, then searched from the lists, as a namespace's later searches are answered.
const second = await open();
for (let i = 0; i < n; i++) {
  await second.keywordLists!.load(`ns${i}`);
  await second.keywordSearch({ namespace: `ns${i}` }, [{ term: "quick", weight: 1 }], {}, 5);
}
const searched = await measure(second);
console.log(JSON.stringify({ built, searched }));
