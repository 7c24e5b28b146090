// @targets postgres
// The search-memory budget counts what a held namespace costs on PostgreSQL (issue 32): with many
// small namespaces, a namespace's keyword lists (a packed space) and their bookkeeping (the
// cache's entry, its follower's, the budget's) hold about 5 KiB of heap each, and the budget
// counted only the space's own estimate (about 4.2 KiB), so 64 MiB were never reached while the
// process held far more. Here: the heap a full collection frees when every namespace's lists are
// let go, against the bytes the budget counted for them. (The heap after a full collection, not
// the process's RSS, which depends on when the collector last ran.)
import { heapStats } from "bun:jsc";
import { afterAll, expect, test } from "bun:test";
import { openStorage } from "../../src/storage/index";
import type { PostgresStorage } from "../../src/storage/postgres/index";
import { freshDatabase } from "../helpers";

let storage: PostgresStorage | undefined;
afterAll(async () => {
  await storage?.close();
});

const heap = () => {
  Bun.gc(true);
  Bun.gc(true);
  return heapStats().heapSize;
};

test("the bytes counted for a held small namespace are at least the heap it holds, built and searched", async () => {
  const url = await freshDatabase();
  const n = 1500;
  const open = async () => {
    storage = (await openStorage({ dataDir: "/nonexistent", databaseUrl: url })) as PostgresStorage;
    return storage;
  };
  // Counted by the budget for the namespaces held, against the heap freed when they are let go.
  const measure = async (s: PostgresStorage) => {
    expect(s.keywordLists!.stats().namespaces).toBe(n);
    const counted = (await s.stats()).gauges.memd_search_memory_held_bytes[1];
    const before = heap();
    s.keywordLists!.close();
    const freed = before - heap();
    expect((await s.stats()).gauges.memd_search_memory_held_bytes[1]).toBe(0);
    await s.close();
    storage = undefined;
    return { counted, freed };
  };
  const first = await open();
  // 20 memories a namespace, texts of 9 words from a vocabulary of ~16,000 (rows written directly:
  // the lists are built from the memories' rows).
  await first.sql.unsafe(`INSERT INTO memories (id, namespace, entity, content, category, importance, created_at, updated_at, state)
    SELECT gen_random_uuid(), 'ns' || (i % ${n}), 'e' || (i % 3),
      'word' || (i * 7 % 5000) || ' alpha' || (i * 13 % 3000) || ' beta' || (i * 17 % 4000) || ' gamma' || (i % 997)
        || ' delta' || (i * 3 % 2000) || ' the quick fox jumps',
      'fact', 0.5, 1000 + i, 1000 + i, 'current' FROM generate_series(0, ${n * 20 - 1}) i`);
  // Built (in the background after a namespace's first search, answered by SQL) and not searched since.
  for (let i = 0; i < n; i++) await first.keywordLists!.load(`ns${i}`);
  const built = await measure(first);
  // Built, then searched from the lists, as a namespace's later searches are answered.
  const second = await open();
  for (let i = 0; i < n; i++) {
    await second.keywordLists!.load(`ns${i}`);
    await second.keywordSearch({ namespace: `ns${i}` }, [{ term: "quick", weight: 1 }], {}, 5);
  }
  const searched = await measure(second);
  // (Measured, a namespace: ~5.1 KiB freed, counted 5.2 KiB. Before: 4.2 KiB counted (0.82 of it),
  // and lists built but not searched yet held ~7 KiB, their packed documents a rope of strings.)
  for (const { counted, freed } of [built, searched]) {
    expect(freed / n).toBeGreaterThan(3000);
    expect(counted / freed).toBeGreaterThan(0.95);
  }
}, 120_000);
