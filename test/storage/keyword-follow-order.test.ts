// The keyword lists follow a store from the record its commit created (src/storage/lmdb/touched.ts,
// NamespaceCache.refresh) only while no later commit can have changed that memory; otherwise they
// read LMDB. A cache over a recording source, refreshed the way runBatch and write() do.
import { expect, test } from "bun:test";
import { NamespaceCache, type Touched } from "../../src/storage/lmdb/touched";
import type { MemoryRecord } from "../../src/storage/records";

/** A source whose one namespace "ns" is loaded; records what it read and from where. */
function recorded() {
  const space = new Map<string, string>();
  const log: string[] = [];
  const lmdb = new Map<string, string>();
  const cache = new NamespaceCache<Map<string, string>, string>(
    {
      empty: () => space,
      load: () => undefined,
      keep: () => true,
      bytes: () => 0,
      read: ([, , id]) => {
        log.push(`read ${id}`);
        return lmdb.get(id);
      },
      created: ([, , id], r) => {
        log.push(`created ${id}`);
        return r.content;
      },
      drop: (s, [, , id]) => void s.delete(id),
      put: (s, [, , id], v) => void s.set(id, v),
    },
    undefined,
    "keyword",
    true,
  );
  return { cache, space, log, lmdb };
}

const key = (id: string): Touched => ["ns", "e", id];
const record = (id: string, content: string) => ({ id, content }) as MemoryRecord;

test("a created record is used when no later commit was followed", async () => {
  const { cache, space, log } = recorded();
  await cache.get("ns");
  cache.refresh([key("a")], 1, new Map([["a", record("a", "first")]]));
  cache.refresh([key("b")], 2, new Map([["b", record("b", "second")]]));
  cache.follow();
  expect(log).toEqual(["created a", "created b"]);
  expect([...space]).toEqual([
    ["a", "first"],
    ["b", "second"],
  ]);
});

test("a created record arriving after a later commit's change was followed is read from LMDB", async () => {
  const { cache, space, log, lmdb } = recorded();
  await cache.get("ns");
  // Commit 2 changed memory a (created by commit 1) and was followed first.
  lmdb.set("a", "changed");
  cache.refresh([key("a")], 2);
  cache.follow();
  cache.refresh([key("a")], 1, new Map([["a", record("a", "as created")]]));
  cache.follow();
  expect(log).toEqual(["read a", "read a"]);
  expect(space.get("a")).toBe("changed");
});

test("a memory touched twice in one batch is read from LMDB", async () => {
  const { cache, space, log, lmdb } = recorded();
  await cache.get("ns");
  lmdb.set("a", "changed");
  cache.refresh([key("a")], 2);
  cache.refresh([key("a")], 1, new Map([["a", record("a", "as created")]]));
  cache.follow();
  expect(log).toEqual(["read a", "read a"]);
  expect(space.get("a")).toBe("changed");
});
