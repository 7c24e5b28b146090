// @targets lmdb postgres binary
// When a fact was true (observedAt): given on raw and smart stores and on PATCH, checked (not in
// the future beyond the skew allowance, not before 1970), shown in every answer and event,
// filtered by observedAfter / observedBefore, passed to the model as the content's date; and it
// never reorders the audit trail, which stays in the order memd recorded the changes.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { type FakeModel, startFakeModel } from "../fake-model";
import { startTestServer, type TestServer } from "../helpers";

const fake: FakeModel = startFakeModel();
let s: TestServer;
const ns = "observed";

beforeAll(async () => {
  s = await startTestServer({ env: { MEMD_LLM_BASE_URL: fake.url, MEMD_LLM_MODEL: "tiny" } });
});
afterAll(async () => {
  await s.stop();
  await fake.stop();
});

const store = (body: Record<string, unknown>) =>
  s.json("POST", "/v1/memory", { namespace: ns, entity: "u", infer: false, ...body });

describe("given, defaulted and shown", () => {
  test("a raw store keeps the given observedAt; without one it is the store time; events carry it", async () => {
    const given = await store({ content: "Bob met Carol at the conference", observedAt: "2024-03-10T08:00:00+02:00" });
    expect(given.status).toBe(200);
    const m = given.body.memories[0];
    expect(m.observedAt).toBe("2024-03-10T06:00:00.000Z");
    expect(Date.parse(m.createdAt)).toBeGreaterThan(Date.parse(m.observedAt));
    const plain = (await store({ content: "Bob likes chess" })).body.memories[0];
    expect(plain.observedAt).toBe(plain.createdAt);
    expect((await s.json("GET", `/v1/memory/${m.id}`)).body.observedAt).toBe("2024-03-10T06:00:00.000Z");
    const [ev] = (await s.json("GET", `/v1/memory/events?namespace=${ns}&memoryId=${m.id}`)).body;
    expect(ev).toMatchObject({ event: "ADD", observedAt: "2024-03-10T06:00:00.000Z", oldObservedAt: null });
  });

  test("PATCH sets it alone or with other fields: UPDATE with the old one on its old side", async () => {
    const m = (await store({ content: "Bob lives in Lyon", observedAt: "2024-01-01T00:00:00Z" })).body.memories[0];
    const p = await s.json("PATCH", `/v1/memory/${m.id}`, { observedAt: "2024-02-01T00:00:00Z" });
    expect(p.status).toBe(200);
    expect(p.body).toMatchObject({ content: "Bob lives in Lyon", observedAt: "2024-02-01T00:00:00.000Z" });
    const [ev] = (await s.json("GET", `/v1/memory/events?namespace=${ns}&memoryId=${m.id}`)).body;
    expect(ev).toMatchObject({
      event: "UPDATE",
      observedAt: "2024-02-01T00:00:00.000Z",
      oldObservedAt: "2024-01-01T00:00:00.000Z",
    });
    const same = await s.json("PATCH", `/v1/memory/${m.id}`, { observedAt: "2024-02-01T00:00:00.000Z" });
    expect(same.status).toBe(400);
  });

  test.each([
    ["far in the future", "2999-01-01T00:00:00Z", "in the future"],
    ["before 1970", "1969-12-31T23:59:59Z", "before 1970"],
    ["not a date", "2024-02-30", "ISO 8601"],
  ])("%s: 400 naming observedAt, on store and on PATCH", async (_name, value, words) => {
    const r = await store({ content: "never stored", observedAt: value });
    expect(r.status).toBe(400);
    expect(r.body.error.details).toEqual([{ field: "observedAt", message: expect.stringContaining(words) }]);
    const m = (await store({ content: "Bob has a cat" })).body.memories[0];
    const p = await s.json("PATCH", `/v1/memory/${m.id}`, { observedAt: value });
    expect(p.status).toBe(400);
    expect(p.body.error.details[0].field).toBe("observedAt");
  });

  test("a clock a little ahead (within 5 minutes) is taken as it is; 1970 itself is allowed", async () => {
    const ahead = new Date(Date.now() + 60_000).toISOString();
    const r = await store({ content: "Bob arrived", observedAt: ahead });
    expect(r.status).toBe(200);
    expect(r.body.memories[0].observedAt).toBe(ahead);
    expect((await store({ content: "Bob epoch", observedAt: "1970-01-01T00:00:00Z" })).status).toBe(200);
  });
});

describe("audit time stays the order of the trail", () => {
  test("a backdated store is the newest event and in a diff since just before it", async () => {
    const since = new Date().toISOString();
    const m = (await store({ content: "Bob sold his bike", observedAt: "2001-01-01T00:00:00Z" })).body.memories[0];
    const [newest] = (await s.json("GET", `/v1/memory/events?namespace=${ns}&limit=1`)).body;
    expect(newest.memoryId).toBe(m.id);
    expect(Date.parse(newest.createdAt)).toBeGreaterThan(Date.parse(since));
    const d = (await s.json("POST", "/v1/memory/diff", { namespace: ns, since })).body;
    expect(d.created.map((c: any) => c.id)).toEqual([m.id]);
  });
});

describe("observedAfter and observedBefore", () => {
  test("list and search keep memories observed in [after, before)", async () => {
    const e = "window";
    const at = ["2023-01-01T00:00:00Z", "2023-02-01T00:00:00Z", "2023-03-01T00:00:00Z"];
    const ids: string[] = [];
    for (const [i, t] of at.entries())
      ids.push((await store({ entity: e, content: `Dana visited city ${i}`, observedAt: t })).body.memories[0].id);
    const list = async (q: string) =>
      (await s.json("GET", `/v1/memory?namespace=${ns}&entity=${e}&${q}`)).body.memories.map((m: any) => m.id);
    expect(await list("observedAfter=2023-02-01T00:00:00Z")).toEqual([ids[2], ids[1]]);
    expect(await list("observedBefore=2023-02-01T00:00:00Z")).toEqual([ids[0]]);
    expect(await list("observedAfter=2023-01-15&observedBefore=2023-02-15")).toEqual([ids[1]]);
    expect((await s.json("GET", `/v1/memory?namespace=${ns}&entity=${e}&observedAfter=soon`)).status).toBe(400);
    const search = async (extra: Record<string, string>) =>
      (
        await s.json("POST", "/v1/memory/search", {
          namespace: ns,
          entity: e,
          query: "Dana visited",
          mode: "keyword",
          ...extra,
        })
      ).body.results
        .map((m: any) => m.id)
        .sort();
    expect(await search({ observedAfter: "2023-02-01T00:00:00Z" })).toEqual([ids[1], ids[2]].sort());
    expect(await search({ observedBefore: "2023-02-01T00:00:00Z" })).toEqual([ids[0]]);
    // Namespace-wide too.
    const all = (
      await s.json("POST", "/v1/memory/search", {
        namespace: ns,
        query: "Dana",
        mode: "keyword",
        observedBefore: "2023-01-02",
      })
    ).body.results.map((m: any) => m.id);
    expect(all).toEqual([ids[0]]);
  });
});

describe("the smart store", () => {
  test("the model gets observedAt as the content's date; what it adds is observed then", async () => {
    fake.reset();
    fake.reply(JSON.stringify({ operations: [{ fact: "Erin started a new job", decision: "ADD", category: "work" }] }));
    const r = await s.json("POST", "/v1/memory", {
      namespace: ns,
      entity: "erin",
      content: "I started a new job last week",
      observedAt: "2025-07-01T12:00:00Z",
    });
    expect(r.status).toBe(200);
    expect(r.body.memories[0]).toMatchObject({
      content: "Erin started a new job",
      observedAt: "2025-07-01T12:00:00.000Z",
    });
    const user = String(fake.requests[0].messages.find((m) => m.role === "user")?.content);
    expect(user).toContain("THE NEW CONTENT WAS SAID ON: 2025-07-01 (Tuesday), 12:00 UTC");
  });

  test("a bad observedAt is refused before the model is called", async () => {
    fake.reset();
    const r = await s.json("POST", "/v1/memory", {
      namespace: ns,
      entity: "erin",
      content: "Something",
      observedAt: "2999-01-01",
    });
    expect(r.status).toBe(400);
    expect(fake.calls).toBe(0);
  });
});
