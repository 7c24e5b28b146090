// @targets lmdb postgres
// The event clock hands out one millisecond per event, so a bulk load stamps its events ahead
// of the wall clock: here 8,000 events in applies of 4,000 (the cheapest kind, SKIP_DUPLICATE,
// which writes an event and nothing else), which puts the namespace's clock seconds ahead however
// busy the machine. An asOf up to the newest event's time is what memd already knows: accepted
// by every as-of read (of another entity of the namespace, whose history is short); one past it
// (and past now) is still refused as in the future.
import { afterAll, beforeAll, expect, test } from "bun:test";
import type { MemoryOp } from "../../src/storage/storage";
import { startTestServer, type TestServer } from "../helpers";

let s: TestServer;
const ns = "clock-ahead";
const iso = (ms: number) => new Date(ms).toISOString();
const bulk = 8_000;

beforeAll(async () => {
  s = await startTestServer();
});
afterAll(() => s?.stop());

test("an asOf at the newest event's time is accepted while the clock runs ahead of the wall clock", async () => {
  const stored = await s.json("POST", "/v1/memory", { namespace: ns, entity: "u", content: "likes tea", infer: false });
  expect(stored.status).toBe(200);
  const id: string = stored.body.memories[0].id;
  const target = Bun.randomUUIDv7();
  const add: MemoryOp = {
    event: "ADD",
    create: { id: target, namespace: ns, entity: "bulk", content: "a fact", category: "general", importance: 0.5 },
  };
  const repeat: MemoryOp = { event: "SKIP_DUPLICATE", target, newContent: "a fact" };
  const t0 = performance.now();
  await s.server.core.storage.apply([add], null);
  for (let i = 0; i < bulk; i += 4000) await s.server.core.storage.apply(Array(4000).fill(repeat), null);
  console.log(`loaded ${bulk} events in ${Math.round(performance.now() - t0)} ms`);
  const [newest] = (await s.json("GET", `/v1/memory/events?namespace=${ns}&limit=1`)).body;
  const newestMs = Date.parse(newest.createdAt);
  // The premise: the load's events are stamped ahead of the wall clock (by up to 8 s).
  expect(newestMs).toBeGreaterThan(Date.now());

  const asOf = encodeURIComponent(iso(newestMs));
  const reads = await Promise.all([
    s.json("GET", `/v1/memory?namespace=${ns}&entity=u&asOf=${asOf}`),
    s.json("GET", `/v1/memory/${id}?asOf=${asOf}`),
    s.json("POST", "/v1/memory/search", { namespace: ns, entity: "u", query: "tea", asOf: iso(newestMs) }),
    s.json("POST", "/v1/memory/context", { namespace: ns, entity: "u", asOf: iso(newestMs) }),
  ]);
  expect(reads.map((r) => r.status)).toEqual([200, 200, 200, 200]);
  expect(reads[0].body.memories.map((m: { id: string }) => m.id)).toEqual([id]);
  expect(reads[1].body.id).toBe(id);
  expect(reads[2].body.results.map((r: { id: string }) => r.id)).toEqual([id]);
  console.log(`as-of reads done ${Math.round(performance.now() - t0)} ms after the load began`);

  // Past the newest event and past now: still the future.
  const later = iso(Math.max(newestMs, Date.now()) + 60_000);
  const refused = await s.json("GET", `/v1/memory?namespace=${ns}&entity=u&asOf=${encodeURIComponent(later)}`);
  expect(refused.status).toBe(400);
  expect(JSON.stringify(refused.body)).toContain("is in the future");
}, 60_000);
