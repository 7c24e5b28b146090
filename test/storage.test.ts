import { afterAll, expect, test } from "bun:test";
import { openStore, writeDurably } from "../src/storage/store";
import { tempDir } from "./helpers";

const { dir, cleanup } = tempDir();
const store = openStore(dir, { mapSizeMb: 64 });
afterAll(async () => {
  await store.close();
  cleanup();
});

test("a write plan that throws writes nothing, even when batched with others that succeed", async () => {
  const boom = new Error("plan failed");
  const results = await Promise.allSettled([
    writeDurably(store, (w) => {
      w.put(store.dbs.memories, "a", { n: 1 });
      return "a";
    }),
    writeDurably(store, (w) => {
      w.put(store.dbs.memories, "b", { n: 2 });
      w.put(store.dbs.events, 1, { n: 2 });
      throw boom;
    }),
    writeDurably(store, (w) => {
      w.put(store.dbs.memories, "c", { n: 3 });
      w.remove(store.dbs.memories, "a");
      return "c";
    }),
  ]);
  expect(results.map((r) => r.status)).toEqual(["fulfilled", "rejected", "fulfilled"]);
  expect((results[1] as PromiseRejectedResult).reason).toBe(boom);
  expect(store.dbs.memories.get("a")).toBeUndefined();
  expect(store.dbs.memories.get("b")).toBeUndefined();
  expect(store.dbs.events.get(1)).toBeUndefined();
  expect(store.dbs.memories.get("c")).toEqual({ n: 3 });
});

test("tuple keys of different (namespace, entity) pairs never share a range", async () => {
  await writeDurably(store, (w) => {
    for (const [ns, entity] of [
      ["team-a", "x"],
      ["team-ab", "x"],
      ["team-a", "xy"],
      ["team-a/x", "y"],
    ])
      w.put(store.dbs.eventsByEntity, [ns, entity, 5, 1], null);
  });
  const keys = [...store.dbs.eventsByEntity.getKeys({ start: ["team-a", "x"], end: ["team-a", "x", "\uffff"] })];
  expect(keys).toEqual([["team-a", "x", 5, 1]]);
});
