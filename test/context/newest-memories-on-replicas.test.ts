// @targets postgres
// A replica's entity list in memory (src/storage/postgres/entity-lists.ts) sees what another
// replica writes, at once: two servers on one database; the context block without a query and the
// list read on one replica equal the database after each store, edit and delete made through the
// other (in-process servers, bounds made small).
import { afterAll, beforeAll, expect, test } from "bun:test";
import { entityLists } from "../../src/storage/entity-lists";
import { startTestServer, type TestServer } from "../helpers";

const bounds = { ...entityLists };
let writer: TestServer;
let reader: TestServer;
const ns = "lists-replicas";

beforeAll(async () => {
  Object.assign(entityLists, { minEntries: 20, maxEntries: 500, totalEntries: 1000 });
  writer = await startTestServer({ env: { MEMD_EMBEDDER: "none" } });
  // The same database: a second replica.
  reader = await startTestServer({ dataDir: writer.dataDir, env: { MEMD_EMBEDDER: "none" } });
});
afterAll(async () => {
  await reader.stop();
  await writer.stop();
  Object.assign(entityLists, bounds);
});

const model = new Map<string, [string, number]>();

async function store(content: string, importance: number) {
  const r = await writer.json("POST", "/v1/memory", { namespace: ns, entity: "e", content, importance, infer: false });
  expect(r.status).toBe(200);
  model.set(r.body.memories[0].id, [content, importance]);
  return r.body.memories[0].id as string;
}

/** The reader's list and context block hold exactly the model. */
async function expectExact() {
  const want = [...model].map(([id, [c, i]]) => [id, c, i]).sort((a, b) => (a[0] < b[0] ? 1 : -1));
  const list = await reader.json("GET", `/v1/memory?namespace=${ns}&entity=e&limit=1000`);
  expect(list.status).toBe(200);
  expect(list.body.memories.map((m: any) => [m.id, m.content, m.importance])).toEqual(want);
  const ctx = await reader.json("POST", "/v1/memory/context", { namespace: ns, entity: "e", maxTokens: 20000 });
  expect(ctx.status).toBe(200);
  const shown = ctx.body.memories.map((m: any) => [m.id, m.content, m.importance]);
  expect(shown.sort((a: string[], b: string[]) => (a[0] < b[0] ? 1 : -1))).toEqual(want);
}

const held = async () =>
  Number((await (await reader.api("GET", "/metrics")).text()).match(/^memd_pg_entity_list_entries (\d+)/m)?.[1]);

test("writes through one replica are in the other's list at once", async () => {
  await Promise.all(Array.from({ length: 30 }, (_, i) => store(`fact number ${i}`, (i % 10) / 10)));
  await expectExact();
  expect(await held()).toBe(30);
  const added = await store("stored through the other replica", 1);
  await expectExact();
  expect((await writer.json("PATCH", `/v1/memory/${added}`, { importance: 0.1, content: "edited there" })).status).toBe(
    200,
  );
  model.set(added, ["edited there", 0.1]);
  await expectExact();
  const gone = [...model.keys()][5];
  expect((await writer.json("DELETE", `/v1/memory/${gone}`)).status).toBe(200);
  model.delete(gone);
  await expectExact();
  expect(await held()).toBe(30);
});
