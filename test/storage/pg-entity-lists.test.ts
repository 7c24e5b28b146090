// @targets postgres
// PostgreSQL's entity lists (src/storage/postgres/entity-lists.ts) against a real database, the
// class alone with a read function of the test's: an erasure leaves nothing of the entity in
// memory, also when a list read's statement ran before the erasure committed and its rows came
// back after it (the read is held between its statement and its answer, so the order is the same
// every run); and a copy that follows stores stays within the totals.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { entityLists } from "../../src/storage/entity-lists";
import { PgEntityLists } from "../../src/storage/postgres/entity-lists";
import { openPostgres, type PostgresStorage } from "../../src/storage/postgres/index";
import type { MemoryOp } from "../../src/storage/storage";
import { freshDatabase } from "../helpers";

const bounds = { ...entityLists };
let a: PostgresStorage;
beforeAll(async () => {
  a = await openPostgres({
    url: await freshDatabase(),
    pool: 4,
    pooler: "none",
    connectTimeoutMs: 5000,
    statementTimeoutMs: 10000,
  });
}, 60_000);
afterAll(async () => {
  Object.assign(entityLists, bounds);
  await a?.close();
});

const add = (namespace: string, content: string): MemoryOp => ({
  event: "ADD",
  create: { id: Bun.randomUUIDv7(), namespace, entity: "e", content, category: "fact", importance: 0.5 },
});

test("a list read in flight across an erasure keeps none of its rows", async () => {
  Object.assign(entityLists, { ...bounds, minEntries: 5 });
  const ns = "lists-erased";
  await a.apply(
    Array.from({ length: 10 }, (_, i) => add(ns, `secret ${i}`)),
    null,
  );
  let ran!: () => void;
  const statementRan = new Promise<void>((resolve) => {
    ran = resolve;
  });
  let open!: () => void;
  const gate = new Promise<void>((resolve) => {
    open = resolve;
  });
  const lists = new PgEntityLists(async (fn) => {
    const rows = await fn(a.sql);
    ran();
    await gate;
    return rows;
  });

  const reading = lists.list({ namespace: ns, entity: "e", limit: 100 }, Date.now());
  await statementRan;
  // The erasure commits, and this replica forgets the entity's copy (as pgErasure does after its commit).
  await a.erase(ns, "e", null);
  lists.erased(JSON.stringify([ns, "e"]));
  open();
  // The read's rows are from before the erasure: not kept, not answered (the SQL answers instead).
  expect(await reading).toBeUndefined();
  expect(lists.entries).toBe(0);
  const after = await lists.list({ namespace: ns, entity: "e", limit: 100 }, Date.now());
  expect(after?.memories ?? []).toEqual([]);
  expect(lists.entries).toBe(0);
});

test("a copy that follows stores stays within the totals, and exact", async () => {
  Object.assign(entityLists, { ...bounds, minEntries: 5, maxEntries: 20, totalEntries: 30 });
  const ns = "lists-growing";
  const lists = new PgEntityLists((fn) => fn(a.sql));
  const ids: string[] = [];
  const store = async (n: number) => {
    const ops = Array.from({ length: n }, (_, i) => add(ns, `fact ${ids.length + i}`));
    await a.apply(ops, null);
    for (const op of ops) ids.push((op as { create: { id: string } }).create.id);
  };
  await store(20);
  for (let i = 0; i < 40; i++) {
    const page = await lists.list({ namespace: ns, entity: "e", limit: 1000 }, Date.now());
    // Answered from the copy or by the SQL: exactly the entity, newest first.
    const got = page ?? (await a.listMemories({ namespace: ns, entity: "e", limit: 1000 }));
    expect(got.memories.map((m) => m.id)).toEqual([...ids].reverse());
    expect(lists.entries).toBeLessThanOrEqual(entityLists.totalEntries);
    // One more store, followed by the next read (one change: caught up, not read again).
    await store(1);
  }
});

test("a read that keeps none of an entity (over the bytes at once) answers by the SQL, not empty", async () => {
  Object.assign(entityLists, { ...bounds, minEntries: 5, totalBytes: 100 });
  const ns = "lists-too-long";
  await a.apply(
    Array.from({ length: 6 }, (_, i) => add(ns, `a memory longer than the bound ${i}`)),
    null,
  );
  const lists = new PgEntityLists((fn) => fn(a.sql));
  const page = await lists.list({ namespace: ns, entity: "e", limit: 100 }, Date.now());
  const got = page ?? (await a.listMemories({ namespace: ns, entity: "e", limit: 100 }));
  expect(got.memories.length).toBe(6);
  expect(lists.entries).toBe(0);
});
