// @targets lmdb postgres binary
// Keyed facts (issue 33): at most one current memory per (namespace, entity, key). A store with
// the key of a current memory updates it in place (same id, an UPDATE event with the old state on
// its old side); the same store again writes nothing and says so; deleting frees the key; reads
// by key, as of a moment too; the smart store leaves keyed memories alone; concurrent stores of
// one key leave one memory.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { type FakeModel, startFakeModel } from "../fake-model";
import { backend, freshDatabase, runMemd, startTestServer, type TestServer, tempDir } from "../helpers";

const fake: FakeModel = startFakeModel();
let s: TestServer;
const ns = "keyed";

beforeAll(async () => {
  s = await startTestServer({ env: { MEMD_LLM_BASE_URL: fake.url, MEMD_LLM_MODEL: "fake" } });
});
afterAll(async () => {
  await s.stop();
  fake.stop();
  tmp.cleanup();
});
const tmp = tempDir("memd-keyed-");

const store = async (body: Record<string, unknown>, status = 200) => {
  const r = await s.json("POST", "/v1/memory", { namespace: ns, infer: false, ...body });
  expect({ status: r.status, body: r.body }).toMatchObject({ status });
  return r.body;
};
const byKey = async (entity: string, key: string, extra = "") => {
  const r = await s.json("GET", `/v1/memory?namespace=${ns}&entity=${entity}&key=${encodeURIComponent(key)}${extra}`);
  expect(r.status).toBe(200);
  return r.body.memories as any[];
};
const eventsOf = async (memoryId: string) => {
  const r = await s.json("GET", `/v1/memory/events?namespace=${ns}&memoryId=${memoryId}&limit=100`);
  expect(r.status).toBe(200);
  return (r.body as any[]).reverse();
};

describe("keyed facts", () => {
  test("a store with a held key updates that memory in place; the same store again changes nothing", async () => {
    const first = await store({ entity: "u1", key: "favourite colour", content: "Favourite colour is blue" });
    expect(first.memories[0]).toMatchObject({
      key: "favourite colour",
      event: "ADD",
      content: "Favourite colour is blue",
    });
    const id = first.memories[0].id;

    const second = await store({
      entity: "u1",
      key: "favourite colour",
      content: "Favourite colour is green",
      tags: ["t"],
    });
    expect(second.memories).toHaveLength(1);
    expect(second.memories[0]).toMatchObject({
      id,
      key: "favourite colour",
      event: "UPDATE",
      content: "Favourite colour is green",
      tags: ["t"],
    });
    expect(second.unchanged).toBe(0);

    const again = await store({
      entity: "u1",
      key: "favourite colour",
      content: "Favourite colour is green",
      tags: ["t"],
    });
    expect(again).toMatchObject({ unchanged: 1, skipped: 1 });
    expect(again.memories[0].id).toBe(id);
    expect(again.memories[0].event).toBeUndefined();

    const events = await eventsOf(id);
    expect(events.map((e) => e.event)).toEqual(["ADD", "UPDATE"]);
    expect(events[1]).toMatchObject({
      oldContent: "Favourite colour is blue",
      newContent: "Favourite colour is green",
    });

    const list = await s.json("GET", `/v1/memory?namespace=${ns}&entity=u1`);
    expect(list.body.memories).toHaveLength(1);
    expect((await byKey("u1", "favourite colour"))[0]).toMatchObject({ id, content: "Favourite colour is green" });
    expect(await byKey("u1", "no such key")).toEqual([]);
    // Shown on every answer: get by id too.
    expect((await s.json("GET", `/v1/memory/${id}`)).body.key).toBe("favourite colour");
    // As of the moment after the first store: the first content, with its key.
    const asOf = new Date(Date.parse(first.memories[0].createdAt) + 0).toISOString();
    expect((await byKey("u1", "favourite colour", `&asOf=${asOf}`))[0]).toMatchObject({
      id,
      key: "favourite colour",
      content: "Favourite colour is blue",
    });
  });

  test("keys are per entity; deleting frees the key; a later store adds a new memory", async () => {
    const a = (await store({ entity: "u2", key: "city", content: "Lives in Lyon" })).memories[0];
    const b = (await store({ entity: "u3", key: "city", content: "Lives in Oslo" })).memories[0];
    expect(a.id).not.toBe(b.id);
    expect((await s.json("DELETE", `/v1/memory/${a.id}`)).status).toBe(200);
    expect(await byKey("u2", "city")).toEqual([]);
    const c = (await store({ entity: "u2", key: "city", content: "Lives in Lyon" })).memories[0];
    expect(c).toMatchObject({ event: "ADD", key: "city" });
    expect(c.id).not.toBe(a.id);
  });

  test("bad keys and a key without an entity are refused", async () => {
    await store({ entity: "u4", key: "", content: "x" }, 400);
    await store({ entity: "u4", key: "k".repeat(201), content: "x" }, 400);
    await store({ entity: "u4", key: "a\u0001b", content: "x" }, 400);
    expect((await store({ entity: "u4", key: "k".repeat(200), content: "x" })).memories[0].key).toHaveLength(200);
    const r = await s.json("GET", `/v1/memory?namespace=${ns}&key=k`);
    expect(r.status).toBe(400);
  });

  test("concurrent stores of one key leave exactly one current memory, and every store is one event", async () => {
    const n = 12;
    const answers = await Promise.all(
      Array.from({ length: n }, (_, i) => store({ entity: "race", key: "k", content: `value ${i}` })),
    );
    const ids = new Set(answers.map((a) => a.memories[0].id));
    expect(ids.size).toBe(1);
    const list = await s.json("GET", `/v1/memory?namespace=${ns}&entity=race`);
    expect(list.body.memories).toHaveLength(1);
    const events = await eventsOf([...ids][0]);
    expect(events.map((e) => e.event)).toEqual(["ADD", ...Array(n - 1).fill("UPDATE")]);
  });

  test("the smart store leaves keyed memories alone unless asked", async () => {
    const keyed = (await store({ entity: "u5", key: "diet", content: "Is vegetarian" })).memories[0];
    fake.reply(JSON.stringify({ operations: [{ fact: "Is vegetarian", decision: "ADD", category: null }] }));
    const r = await s.json("POST", "/v1/memory", { namespace: ns, entity: "u5", content: "Is vegetarian" });
    expect(r.status).toBe(200);
    // Not skipped as a duplicate of the keyed memory: a new memory, and no event names the keyed one.
    expect(r.body.memories.map((m: any) => m.id)).not.toContain(keyed.id);
    expect((await eventsOf(keyed.id)).map((e) => e.event)).toEqual(["ADD"]);
    // Asked: the keyed memory is compared with (an exact repeat is skipped against it).
    const other = (await store({ entity: "u6", key: "diet", content: "Is vegan" })).memories[0];
    const asked = await s.json("POST", "/v1/memory", {
      namespace: ns,
      entity: "u6",
      content: "Is vegan",
      includeKeyed: true,
    });
    expect(asked.status).toBe(200);
    expect(asked.body.skipped).toBe(1);
    expect((await eventsOf(other.id)).map((e) => e.event)).toEqual(["ADD", "SKIP_DUPLICATE"]);
  });

  test("export and import keep the key, and the imported store still holds one memory per key", async () => {
    const held = (await store({ entity: "tx", key: "pet", content: "Has a cat" })).memories[0];
    const r = await s.api("GET", `/v1/export?namespace=${ns}`);
    expect(r.status).toBe(200);
    const text = await r.text();
    const line = text
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l))
      .find((l) => l.type === "memory" && l.id === held.id);
    expect(line.key).toBe("pet");
    const file = join(tmp.dir, "keyed.jsonl");
    writeFileSync(file, text);
    let flags: string[];
    let server: Parameters<typeof startTestServer>[0];
    if (backend === "postgres") {
      const url = await freshDatabase();
      flags = ["--database-url", url];
      server = { args: ["--database-url", url] };
    } else {
      const dir = join(tmp.dir, "imported");
      flags = ["--data-dir", dir];
      server = { dataDir: dir };
    }
    const done = await runMemd(["import", file, ...flags], {
      ...process.env,
      MEMD_DATA_DIR: "",
      MEMD_DATABASE_URL: "",
    });
    expect({ code: done.code, err: done.err }).toMatchObject({ code: 0 });
    const t = await startTestServer(server);
    try {
      const got = await t.json("GET", `/v1/memory?namespace=${ns}&entity=tx&key=pet`);
      expect(got.body.memories.map((m: any) => [m.id, m.key])).toEqual([[held.id, "pet"]]);
      const again = await t.json("POST", "/v1/memory", {
        namespace: ns,
        entity: "tx",
        key: "pet",
        content: "Has a dog",
        infer: false,
      });
      expect(again.body.memories[0]).toMatchObject({ id: held.id, event: "UPDATE", content: "Has a dog" });
    } finally {
      await t.stop();
    }
  });
});
