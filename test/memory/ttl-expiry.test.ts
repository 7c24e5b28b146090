// @targets lmdb postgres binary
import { afterAll, beforeAll, expect, test } from "bun:test";
import { startTestServer, type TestServer } from "../helpers";

let s: TestServer;
beforeAll(async () => (s = await startTestServer()));
afterAll(() => s.stop());

test("a memory with ttl is gone from reads at expiry and recorded as DELETE (expired) within 2 s", async () => {
  const since = new Date().toISOString();
  const r = await s.json("POST", "/v1/memory", {
    namespace: "ttl",
    entity: "u",
    content: "short-lived",
    infer: false,
    ttl: 1,
  });
  const keep = await s.json("POST", "/v1/memory", { namespace: "ttl", entity: "u", content: "stays", infer: false });
  const m = r.body.memories[0];
  expect(Date.parse(m.expiresAt) - Date.parse(m.createdAt)).toBe(1000);
  expect((await s.json("GET", `/v1/memory/${m.id}`)).status).toBe(200);

  await Bun.sleep(Date.parse(m.expiresAt) - Date.now() + 5);
  expect((await s.json("GET", `/v1/memory/${m.id}`)).status).toBe(404);
  expect((await s.json("GET", "/v1/memory?namespace=ttl&entity=u")).body.memories.map((x: any) => x.content)).toEqual([
    "stays",
  ]);

  const deadline = Date.parse(m.expiresAt) + 2000;
  let events: any[] = [];
  while (Date.now() < deadline) {
    events = (await s.json("GET", `/v1/memory/events?namespace=ttl&memoryId=${m.id}`)).body;
    if (events.length === 2) break;
    await Bun.sleep(50);
  }
  expect(events.map((e) => [e.event, e.reason, e.oldContent])).toEqual([
    ["DELETE", "expired", "short-lived"],
    ["ADD", null, null],
  ]);
  expect(Date.parse(events[0].createdAt)).toBeLessThanOrEqual(deadline);

  // Since a time after the ADD, the diff shows the deletion; from before it, it nets out.
  const afterAdd = (
    await s.json("POST", "/v1/memory/diff", { namespace: "ttl", since: keep.body.memories[0].createdAt })
  ).body;
  expect(afterAdd.deleted).toEqual([
    { id: m.id, content: "short-lived", category: "general", deletedAt: events[0].createdAt, reason: "expired" },
  ]);
  const whole = (await s.json("POST", "/v1/memory/diff", { namespace: "ttl", since })).body;
  expect(whole.created.map((c: any) => c.content)).toEqual(["stays"]);
  expect(whole.deleted).toEqual([]);
});
