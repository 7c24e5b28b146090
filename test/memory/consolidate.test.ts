// @targets lmdb postgres binary
// Consolidation that loses nothing (issue 33): only what is clearly the same fact is merged
// without a model (never memories differing in a number, a negation or a name; never keyed facts
// or memories with an expiry); a MERGE names the merged memories, a DELETE each names where it
// went; a dry run writes nothing; the figures are in the answer and in /metrics; a restore to the
// moment before undoes it. With a model configured, the model judges the group and gives the text.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { type FakeModel, startFakeModel } from "../fake-model";
import { startTestServer, type TestServer } from "../helpers";

const fake: FakeModel = startFakeModel();
let s: TestServer;
let withModel: TestServer;
const ns = "tidy";

beforeAll(async () => {
  [s, withModel] = await Promise.all([
    startTestServer(),
    startTestServer({ env: { MEMD_LLM_BASE_URL: fake.url, MEMD_LLM_MODEL: "tiny", MEMD_LLM_TIMEOUT_MS: "5000" } }),
  ]);
});
afterAll(async () => {
  await Promise.all([s.stop(), withModel.stop()]);
  fake.stop();
});

const raw = async (t: TestServer, entity: string, content: string, extra: Record<string, unknown> = {}) => {
  const r = await t.json("POST", "/v1/memory", { namespace: ns, entity, content, infer: false, ...extra });
  expect(r.status).toBe(200);
  return r.body.memories[0];
};
const events = async (t: TestServer, entity: string) =>
  ((await t.json("GET", `/v1/memory/events?namespace=${ns}&entity=${entity}&limit=1000`)).body as any[]).reverse();
const contents = async (t: TestServer, entity: string, asOf?: string) =>
  (
    await t.json("GET", `/v1/memory?namespace=${ns}&entity=${entity}&limit=1000${asOf ? `&asOf=${asOf}` : ""}`)
  ).body.memories
    .map((m: any) => m.content)
    .sort();

describe("consolidation without a model", () => {
  test("merges only the same fact, names what it merged, and a restore undoes it", async () => {
    const e = "u";
    const a = await raw(s, e, "Alice likes green tea", { tags: ["drink"], importance: 0.4 });
    const b = await raw(s, e, "alice likes green tea.", { tags: ["tea"], importance: 0.7 });
    const c = await raw(s, e, "Green tea, Alice liked it", { metadata: { from: "chat" } });
    for (const x of [
      "Alice has 2 cats",
      "Alice has 3 cats",
      "Alice doesn't like coffee",
      "Alice likes coffee",
      "Alice works with William",
      "Alice works with Williams",
    ])
      await raw(s, e, x);
    await raw(s, e, "Alice likes green tea", { key: "drink" });
    await raw(s, e, "Alice likes green tea", { ttl: 3600 });
    const before = await contents(s, e);
    const trail = (await events(s, e)).length;
    const moment = (await events(s, e)).at(-1).createdAt;

    const dry = await s.json("POST", "/v1/memory/consolidate", { namespace: ns, entity: e, dryRun: true });
    expect(dry.status).toBe(200);
    expect(dry.body).toMatchObject({ dryRun: true, memoriesMerged: 2, events: [] });
    expect(dry.body.groups).toHaveLength(1);
    expect((await events(s, e)).length).toBe(trail);

    const r = await s.json("POST", "/v1/memory/consolidate", { namespace: ns, entity: e });
    expect(r.status).toBe(200);
    expect(r.body.memoriesMerged).toBe(2);
    expect(r.body.tookMs).toBeGreaterThanOrEqual(0);
    const [g] = r.body.groups;
    // The most important is kept; nothing is lost: tags and metadata of the merged ones join it.
    expect(g.kept).toMatchObject({
      id: b.id,
      content: "alice likes green tea.",
      importance: 0.7,
      metadata: { from: "chat" },
    });
    expect([...g.kept.tags].sort()).toEqual(["drink", "tea"]);
    expect(g.merged.map((m: any) => m.id).sort()).toEqual([a.id, c.id].sort());
    expect(g.by).toBe("rules");
    const written = r.body.events;
    expect(written.map((x: any) => x.event)).toEqual(["MERGE", "DELETE", "DELETE"]);
    expect(written[0]).toMatchObject({ memoryId: b.id });
    expect([...written[0].mergedIds].sort()).toEqual([a.id, c.id].sort());
    for (const d of written.slice(1)) expect(d.mergedInto).toBe(b.id);

    const after = await contents(s, e);
    expect(after).toHaveLength(before.length - 2);
    // Nothing else was touched: numbers, negation, names, the keyed fact and the one with an expiry.
    for (const x of ["Alice has 2 cats", "Alice has 3 cats", "Alice doesn't like coffee", "Alice likes coffee"])
      expect(after).toContain(x);
    expect(after.filter((x: string) => x === "Alice likes green tea")).toHaveLength(2);
    // Nothing left to merge.
    expect((await s.json("POST", "/v1/memory/consolidate", { namespace: ns, entity: e })).body.memoriesMerged).toBe(0);

    const metrics = await (await s.api("GET", "/metrics")).text();
    expect(metrics).toMatch(/^memd_consolidation_memories_merged_total [1-9]/m);
    expect(metrics).toMatch(/^memd_consolidation_groups_total [1-9]/m);

    const undo = await s.json("POST", "/v1/memory/restore", { namespace: ns, entity: e, asOf: moment });
    expect(undo.status).toBe(200);
    expect(await contents(s, e)).toEqual(before);
  });
});

describe("consolidation with a model", () => {
  test("the model judges the group and gives the merged text; a group it rejects stays", async () => {
    const e = "m";
    const a = await raw(withModel, e, "Bob plays chess on Sundays");
    const b = await raw(withModel, e, "bob plays chess on sundays!");
    fake.reply(JSON.stringify({ same: true, content: "Bob plays chess every Sunday", reason: "one habit" }));
    const r = await withModel.json("POST", "/v1/memory/consolidate", { namespace: ns, entity: e });
    expect(r.status).toBe(200);
    expect(r.body.groups[0]).toMatchObject({ by: "model", kept: { content: "Bob plays chess every Sunday" } });
    expect(r.body.events[0].reason).toContain("one habit");
    expect([a.id, b.id]).toContain(r.body.groups[0].kept.id);
    expect(await contents(withModel, e)).toEqual(["Bob plays chess every Sunday"]);

    await raw(withModel, "m2", "Carol runs");
    await raw(withModel, "m2", "carol runs");
    fake.reply(JSON.stringify({ same: false, content: "", reason: "not sure" }));
    const no = await withModel.json("POST", "/v1/memory/consolidate", { namespace: ns, entity: "m2" });
    expect(no.body).toMatchObject({ memoriesMerged: 0, groups: [] });
    expect(await contents(withModel, "m2")).toEqual(["Carol runs", "carol runs"]);
  });
});

describe("consolidation in the background", () => {
  test("MEMD_CONSOLIDATE_EVERY merges the entities changed since the last pass (no actor)", async () => {
    const t = await startTestServer({ env: { MEMD_CONSOLIDATE_EVERY: "1" } });
    try {
      await raw(t, "bg", "Dora keeps bees");
      await raw(t, "bg", "dora keeps bees!");
      for (let i = 0; i < 100 && (await contents(t, "bg")).length > 1; i++) await Bun.sleep(50);
      expect(await contents(t, "bg")).toHaveLength(1);
      const merge = (await events(t, "bg")).find((e: any) => e.event === "MERGE");
      expect(merge).toMatchObject({ actorKeyId: null, mergedIds: [expect.any(String)] });
    } finally {
      await t.stop();
    }
  }, 20_000);
});
