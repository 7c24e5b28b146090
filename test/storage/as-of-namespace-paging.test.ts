// @targets lmdb postgres
// A namespace as of a moment, through the storage interface: pages bounded by the index entries
// (LMDB) or memories (PostgreSQL) they read may be short, yet following `next` gives every memory
// of that moment exactly once, newest first, whatever the page size.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { openStorage } from "../../src/storage/index";
import type { MemoryOp, Storage } from "../../src/storage/storage";
import { backend, freshDatabase, tempDir } from "../helpers";

const tmp = tempDir("memd-asof-ns-");
let storage: Storage;
let middle = 0;
let end = 0;
const aliveAtMiddle = new Set<string>();

beforeAll(async () => {
  storage = await openStorage(
    backend === "postgres" ? { dataDir: "", databaseUrl: await freshDatabase() } : { dataDir: tmp.dir },
  );
  // 3,000 memories in 30 entities, each edited twice (9,000 events), then every third deleted.
  const ids: string[] = [];
  const add: MemoryOp[] = [];
  for (let i = 0; i < 3000; i++) {
    const id = Bun.randomUUIDv7();
    ids.push(id);
    add.push({
      event: "ADD",
      create: { id, namespace: "ns", entity: `e${i % 30}`, content: `fact ${i}`, category: "general", importance: 0.5 },
    });
  }
  await storage.apply(add, null);
  for (const round of [1, 2])
    await storage.apply(
      ids.map((target, i) => ({ event: "UPDATE", target, patch: { content: `fact ${i} v${round}` } })),
      null,
    );
  const [last] = await storage.newestEvents({ namespace: "ns" }, 1);
  middle = last.atMs;
  for (const id of ids) aliveAtMiddle.add(id);
  await storage.apply(
    ids.filter((_, i) => i % 3 === 0).map((target) => ({ event: "DELETE", target, reason: "deleted" })),
    null,
  );
  end = (await storage.newestEvents({ namespace: "ns" }, 1))[0].atMs;
}, 120_000);
afterAll(async () => {
  await storage.close();
  tmp.cleanup();
});

async function allPages(asOf: number, limit: number) {
  const out: string[] = [];
  let before: string | undefined;
  for (let i = 0; i < 1000; i++) {
    const page = await storage.entityAsOf({ namespace: "ns", asOf, limit, ...(before ? { before } : {}) });
    out.push(...page.memories.map((m) => m.id));
    if (page.next === undefined) return out;
    before = page.next;
  }
  throw new Error("more than 1000 pages");
}

test("every memory of the moment once, newest first, for any page size", async () => {
  const wantMiddle = [...aliveAtMiddle].sort().reverse();
  for (const limit of [1000, 97]) expect(await allPages(middle, limit)).toEqual(wantMiddle);
  const atEnd = await allPages(end, 500);
  expect(atEnd.length).toBe(2000);
  const current = await storage.listMemories({ namespace: "ns", limit: 1000 });
  expect(atEnd.slice(0, 1000)).toEqual(current.memories.map((m) => m.id));
  const page = await storage.entityAsOf({ namespace: "ns", asOf: middle, limit: 5 });
  expect(page.memories.map((m) => m.content)).toEqual([
    "fact 2999 v2",
    "fact 2998 v2",
    "fact 2997 v2",
    "fact 2996 v2",
    "fact 2995 v2",
  ]);
}, 120_000);
