// @targets lmdb postgres
// The entity lists each backend keeps in memory for list reads (src/storage/{lmdb,postgres}/
// entity-lists.ts: the context block without a query reads an entity's newest memories on every
// call) answer exactly what the database holds after every kind of change: a store, a keyed store
// in place, an edit, a delete, a restore, an expiry, `memd import` into the running server (its
// events older than the copy's), an entity's deletion and its erasure; and on PostgreSQL, changes
// made through another replica. The bounds are made small so that a copy holds only the newest
// part of an entity and list pages run on past it into the database (in-process servers).
import { afterAll, beforeAll, expect, test } from "bun:test";
import { join } from "node:path";
import { entityLists } from "../../src/storage/entity-lists";
import { backend, runMemd, startTestServer, type TestServer, tempDir } from "../helpers";

const bounds = { ...entityLists };
let s: TestServer;
const ns = "lists-exact";
const tmp = tempDir("memd-entity-lists-");
const memd = (args: string[]) => runMemd(args, { ...process.env, MEMD_DATA_DIR: "", MEMD_DATABASE_URL: "" });

beforeAll(async () => {
  Object.assign(entityLists, { minEntries: 20, maxEntries: 120, totalEntries: 1000, maxCatchUp: 5 });
  s = await startTestServer({ env: { MEMD_EMBEDDER: "none" } });
});
afterAll(async () => {
  await s.stop();
  Object.assign(entityLists, bounds);
  tmp.cleanup();
});

/** What the entity holds, as the test wrote it: id -> [content, importance]. */
const model = new Map<string, [string, number]>();

async function store(content: string, importance: number, extra: Record<string, unknown> = {}) {
  const r = await s.json("POST", "/v1/memory", {
    namespace: ns,
    entity: "e",
    content,
    importance,
    infer: false,
    ...extra,
  });
  expect(r.status).toBe(200);
  const m = r.body.memories[0];
  model.set(m.id, [content, importance]);
  return m.id as string;
}

const gauge = backend === "postgres" ? "memd_pg_entity_list_entries" : "memd_lmdb_entity_list_entries";
const listEntries = async () =>
  Number((await (await s.api("GET", "/metrics")).text()).match(new RegExp(`^${gauge} (\\d+)`, "m"))?.[1]);
/** The flag naming a server's store, for memd commands. */
const storeOf = (t: TestServer) => (t.databaseUrl ? ["--database-url", t.databaseUrl] : ["--data-dir", t.dataDir]);

/** Every page of the entity's list at `limit`, as [id, content, importance] newest first. */
async function listed(limit: number) {
  const out: [string, string, number][] = [];
  let cursor: string | null = null;
  for (let i = 0; i < 1000; i++) {
    const q = `namespace=${ns}&entity=e&limit=${limit}${cursor ? `&cursor=${cursor}` : ""}`;
    const r: any = await s.json("GET", `/v1/memory?${q}`);
    expect(r.status).toBe(200);
    for (const m of r.body.memories) out.push([m.id, m.content, m.importance]);
    cursor = r.body.nextCursor;
    if (!cursor) return out;
  }
  throw new Error("no end to the pages");
}

/** The list (two page sizes) and the context block without a query hold exactly the model. */
async function expectExact() {
  const want = [...model].map(([id, [c, i]]) => [id, c, i]).sort((a, b) => (a[0] < b[0] ? 1 : -1));
  expect(await listed(7)).toEqual(want as never);
  expect(await listed(1000)).toEqual(want as never);
  // A budget that holds every memory: the block is the whole entity.
  const ctx = await s.json("POST", "/v1/memory/context", { namespace: ns, entity: "e", maxTokens: 20000 });
  expect(ctx.status).toBe(200);
  expect(ctx.body.truncated).toBe(false);
  const shown = ctx.body.memories.map((m: any) => [m.id, m.content, m.importance]);
  expect(shown.sort((a: string[], b: string[]) => (a[0] < b[0] ? 1 : -1))).toEqual(want);
  return ctx.body.memories as { id: string }[];
}

test("an entity's list in memory follows every change, past its bounds too", async () => {
  for (let i = 0; i < 160; i += 20)
    await Promise.all(Array.from({ length: 20 }, (_, j) => store(`fact number ${i + j}`, ((i + j) % 10) / 10)));
  await s.json("POST", "/v1/memory", { namespace: ns, entity: "other", content: "another entity", infer: false });
  await expectExact();
  // The context's read kept the newest 120 of the entity in memory.
  expect(await listEntries()).toBe(120);
  // The entity as it is now (its newest event's time, docs/time.md), to restore later.
  const lastEvent = await s.json("GET", `/v1/memory/events?namespace=${ns}&entity=e&limit=1`);
  expect(lastEvent.status).toBe(200);
  const restorePoint = lastEvent.body[0].createdAt as string;
  const before = new Map(model);

  // Memories of the same entity stored elsewhere now, to import into this server at the end: their
  // ids are newer than the ones kept in memory, their events older than this server's last ones.
  const source = await startTestServer({ dataDir: join(tmp.dir, "source"), env: { MEMD_EMBEDDER: "none" } });
  const imported = new Map<string, [string, number]>();
  for (let i = 0; i < 5; i++) {
    const r = await source.json("POST", "/v1/memory", {
      namespace: ns,
      entity: "e",
      content: `imported ${i}`,
      importance: 0.2,
      infer: false,
    });
    imported.set(r.body.memories[0].id, [`imported ${i}`, 0.2]);
  }
  await source.stop();
  const file = join(tmp.dir, "export.jsonl");
  expect((await memd(["export", ...storeOf(source), "--out", file])).code).toBe(0);
  await Bun.sleep(20);

  const newest = await store("the newest and most important", 1);
  expect((await expectExact())[0].id).toBe(newest);

  const ids = [...model.keys()];
  const edited = ids[3];
  const patched = await s.json("PATCH", `/v1/memory/${edited}`, { importance: 1, content: "edited in place" });
  expect(patched.status).toBe(200);
  model.set(edited, ["edited in place", 1]);
  // An old memory (beyond the 120 kept) edited too.
  const old = ids[150];
  expect((await s.json("PATCH", `/v1/memory/${old}`, { importance: 0.95 })).status).toBe(200);
  model.set(old, [model.get(old)![0], 0.95]);
  await expectExact();

  expect((await s.json("DELETE", `/v1/memory/${ids[10]}`)).status).toBe(200);
  model.delete(ids[10]);
  const keyed = await store("keyed fact, first", 0.5, { key: "k1" });
  await expectExact();
  const again = await s.json("POST", "/v1/memory", {
    namespace: ns,
    entity: "e",
    content: "keyed fact, second",
    importance: 0.5,
    key: "k1",
  });
  expect(again.body.memories[0].id).toBe(keyed);
  model.set(keyed, ["keyed fact, second", 0.5]);
  await expectExact();

  // More changes at once than the copy follows (maxCatchUp 5): it is read again.
  for (let i = 0; i < 8; i++) await store(`burst ${i}`, 0.3);
  await expectExact();

  // A restore: the entity back to what it was, in one write.
  const restored = await s.json("POST", "/v1/memory/restore", { namespace: ns, entity: "e", asOf: restorePoint });
  expect(restored.status).toBe(200);
  model.clear();
  for (const [id, v] of before) model.set(id, v);
  await expectExact();

  // `memd import` into the running server.
  const done = await memd(["import", file, ...storeOf(s)]);
  expect(done.code).toBe(0);
  for (const [id, v] of imported) model.set(id, v);
  await expectExact();

  // An expiry: current in the database until the sweeper deletes it, never listed once past it
  // (not read before it: a slow read could straddle it).
  const ttl = await store("gone soon", 0.9, { ttl: 0.2 });
  model.delete(ttl);
  // (Its expiry is on the event clock, which may run a little ahead of the wall clock.)
  for (let i = 0; i < 100 && (await s.json("GET", `/v1/memory/${ttl}`)).status !== 404; i++) await Bun.sleep(50);
  await expectExact();

  // The entity's deletion, then its erasure: the copy holds no erased content.
  expect((await s.json("DELETE", `/v1/memory?namespace=${ns}&entity=e`)).status).toBe(200);
  model.clear();
  await expectExact();
  await store("after the deletion", 0.5);
  expect((await s.json("POST", "/v1/memory/erase", { namespace: ns, entity: "e" })).status).toBe(200);
  model.clear();
  await expectExact();
  expect(await listEntries()).toBe(0);
});

test("a copy stops at the bytes bound: long memories are kept fewer, and lists stay exact", async () => {
  const saved = entityLists.totalBytes;
  // About 25 memories of 1,000 characters (recordBytes: two bytes a character and ~300 more).
  entityLists.totalBytes = 60_000;
  try {
    const ids: string[] = [];
    for (let i = 0; i < 60; i += 20)
      ids.push(
        ...(await Promise.all(
          Array.from({ length: 20 }, async (_, j) => {
            const content = `long memory ${i + j} ${"x".repeat(1000)}`;
            const r = await s.json("POST", "/v1/memory", { namespace: ns, entity: "long", content, infer: false });
            expect(r.status).toBe(200);
            return r.body.memories[0].id as string;
          }),
        )),
      );
    const ctx = await s.json("POST", "/v1/memory/context", { namespace: ns, entity: "long", maxTokens: 20000 });
    expect(ctx.status).toBe(200);
    expect(ctx.body.memories.map((m: { id: string }) => m.id).sort()).toEqual([...ids].sort());
    const kept = await listEntries();
    expect(kept).toBeGreaterThanOrEqual(20);
    expect(kept).toBeLessThan(30);
    const list = await s.json("GET", `/v1/memory?namespace=${ns}&entity=long&limit=1000`);
    expect(list.body.memories.map((m: { id: string }) => m.id)).toEqual([...ids].sort().reverse());
  } finally {
    entityLists.totalBytes = saved;
  }
});
