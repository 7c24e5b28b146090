import { afterAll, expect, test } from "bun:test";
import { openLmdb } from "../../src/storage/lmdb/index";
import { tempDir } from "../helpers";

const { dir, cleanup } = tempDir();
const storage = await openLmdb(dir, { mapSizeMb: 64 });
const { dbs } = storage;
afterAll(async () => {
  await storage.close();
  cleanup();
});

test("a write plan that throws writes nothing, even when batched with others that succeed", async () => {
  const boom = new Error("plan failed");
  const results = await Promise.allSettled([
    storage.write((w) => {
      w.put(dbs.memories, "a", { n: 1 });
      return "a";
    }),
    storage.write((w) => {
      w.put(dbs.memories, "b", { n: 2 });
      w.put(dbs.events, 1, { n: 2 });
      throw boom;
    }),
    storage.write((w) => {
      w.put(dbs.memories, "c", { n: 3 });
      w.remove(dbs.memories, "a");
      return "c";
    }),
  ]);
  expect(results.map((r) => r.status)).toEqual(["fulfilled", "rejected", "fulfilled"]);
  expect((results[1] as PromiseRejectedResult).reason).toBe(boom);
  expect(dbs.memories.get("a")).toBeUndefined();
  expect(dbs.memories.get("b")).toBeUndefined();
  expect(dbs.events.get(1)).toBeUndefined();
  expect(dbs.memories.get("c")).toEqual({ n: 3 });
});

test("tuple keys of different (namespace, entity) pairs never share a range", async () => {
  await storage.write((w) => {
    for (const [ns, entity] of [
      ["team-a", "x"],
      ["team-ab", "x"],
      ["team-a", "xy"],
      ["team-a/x", "y"],
    ])
      w.put(dbs.eventsByEntity, [ns, entity, 5, 1], null);
  });
  const keys = [...dbs.eventsByEntity.getKeys({ start: ["team-a", "x"], end: ["team-a", "x", "\uffff"] })];
  expect(keys).toEqual([["team-a", "x", 5, 1]]);
});

test("END closes a prefix range after names that start above U+FFFF (emoji), which '\\uffff' did not", async () => {
  const { END } = await import("../../src/storage/lmdb/layout");
  await storage.write((w) => {
    for (const entity of ["a", "\uffff", "😀 friend", "\u{10FFFF}\u{10FFFF}"])
      w.put(dbs.entityMemories, ["ns-end", entity, "id"], null);
  });
  const all = [...dbs.entityMemories.getKeys({ start: ["ns-end"], end: ["ns-end", END] })];
  expect(all.map((k) => (k as string[])[1])).toEqual(["a", "\uffff", "😀 friend", "\u{10FFFF}\u{10FFFF}"]);
  const old = [...dbs.entityMemories.getKeys({ start: ["ns-end"], end: ["ns-end", "\uffff"] })];
  expect(old.length).toBe(1);
});

test("applies batched into one transaction act in arrival order, and one whose plan throws writes nothing", async () => {
  const add = (id: string, content: string) => ({
    event: "ADD" as const,
    create: { id, namespace: "batch", entity: "e", content, category: "general", importance: 0.5 },
  });
  const id1 = Bun.randomUUIDv7();
  const id2 = Bun.randomUUIDv7();
  const results = await Promise.allSettled([
    storage.apply([add(id1, "green tea")], "k"),
    storage.apply([{ event: "UPDATE", target: id1, patch: { content: "black coffee" } }], "k"),
    storage.apply([{ event: "BOGUS" } as never], "k"),
    storage.apply([add(id2, "green tea again")], "k"),
  ]);
  expect(results.map((r) => r.status)).toEqual(["fulfilled", "fulfilled", "rejected", "fulfilled"]);
  expect((await storage.getMemory(id1))?.content).toBe("black coffee");
  const hits = (q: string[]) =>
    storage.keywordSearch(
      { namespace: "batch" },
      q.map((term) => ({ term, weight: 1 })),
      {},
      10,
    );
  expect((await hits(["coffee"])).map((h) => h.memory.id)).toEqual([id1]);
  expect((await hits(["green"])).map((h) => h.memory.id)).toEqual([id2]);
  const events = await storage.newestEvents({ namespace: "batch" }, 10);
  expect(events.map((e) => e.event)).toEqual(["ADD", "UPDATE", "ADD"]);
  // The index of record holds exactly the two current memories.
  expect(
    [...dbs.namespaceMemories.getKeys({ start: ["batch"], end: ["batch", "\uffff"] })].map((k) => (k as string[])[1]),
  ).toEqual([id1, id2]);
});
