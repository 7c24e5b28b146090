// @targets lmdb postgres
// The event clock hands out one millisecond per event, so a bulk change (here: deleting an
// entity's 1,500 memories in one request) stamps its events ahead of the wall clock. An asOf up
// to the newest event's time is what memd already knows: accepted by every as-of read, and one
// past it (and past now) is still refused as in the future.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { startTestServer, type TestServer } from "../helpers";

let s: TestServer;
const ns = "clock-ahead";
const iso = (ms: number) => new Date(ms).toISOString();

beforeAll(async () => {
  s = await startTestServer();
});
afterAll(() => s?.stop());

test("an asOf at the newest event's time is accepted while the clock runs ahead of the wall clock", async () => {
  const ids: string[] = [];
  for (let i = 0; i < 1500; i += 100) {
    const stored = await Promise.all(
      Array.from({ length: 100 }, (_, j) =>
        s.json("POST", "/v1/memory", { namespace: ns, entity: "bulk", content: `fact number ${i + j}`, infer: false }),
      ),
    );
    for (const r of stored) {
      expect(r.status).toBe(200);
      ids.push(r.body.memories[0].id);
    }
  }
  const deleted = await s.json("DELETE", `/v1/memory?namespace=${ns}&entity=bulk`);
  expect(deleted).toMatchObject({ status: 200, body: { deleted: 1500 } });
  const [newest] = (await s.json("GET", `/v1/memory/events?namespace=${ns}&limit=1`)).body;
  const newestMs = Date.parse(newest.createdAt);
  // The premise: 1,500 events in one transaction are stamped ahead of the wall clock.
  expect(newestMs).toBeGreaterThan(Date.now());

  const asOf = encodeURIComponent(iso(newestMs));
  const reads = await Promise.all([
    s.json("GET", `/v1/memory?namespace=${ns}&entity=bulk&asOf=${asOf}`),
    s.json("GET", `/v1/memory/${ids[0]}?asOf=${asOf}`),
    s.json("POST", "/v1/memory/search", { namespace: ns, entity: "bulk", query: "fact", asOf: iso(newestMs) }),
    s.json("POST", "/v1/memory/context", { namespace: ns, entity: "bulk", asOf: iso(newestMs) }),
  ]);
  expect(reads.map((r) => r.status)).toEqual([200, 404, 200, 200]);
  expect(reads[0].body.memories).toEqual([]); // all deleted by then
  expect(reads[2].body.results).toEqual([]);
  // Just before the first DELETE: every memory is there.
  const before = encodeURIComponent(iso(newestMs - 1500));
  const page = await s.json("GET", `/v1/memory?namespace=${ns}&entity=bulk&asOf=${before}&limit=10`);
  expect(page.status).toBe(200);
  expect(page.body.memories).toHaveLength(10);

  // Past the newest event and past now: still the future.
  const later = iso(Math.max(newestMs, Date.now()) + 60_000);
  const refused = await s.json("GET", `/v1/memory?namespace=${ns}&entity=bulk&asOf=${encodeURIComponent(later)}`);
  expect(refused.status).toBe(400);
  expect(JSON.stringify(refused.body)).toContain("is in the future");
}, 60_000);
