// @targets lmdb postgres binary
// As of a moment, keyword search and the context block treat the memories stored next to a hit as
// they do live (docs/search.md "Adjacent hits", docs/context.md "Memories adjacent in time"): a
// search as of now scores exactly as the live one, and the block as of a moment places the hit's
// neighbours of that moment after it, even ones edited or deleted since.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { startTestServer, type TestServer } from "../helpers";

let s: TestServer;
beforeAll(async () => {
  s = await startTestServer({ env: { MEMD_EMBEDDER: "none" } });
});
afterAll(() => s.stop());

async function store(namespace: string, content: string) {
  const r = await s.json("POST", "/v1/memory", { namespace, entity: "u", content, infer: false });
  expect(r.status).toBe(200);
  return r.body.memories[0].id as string;
}

/** The time of the namespace's newest event: an instant after every write so far (docs/time.md). */
async function momentNow(namespace: string) {
  const r = await s.json("GET", `/v1/memory/events?namespace=${namespace}&entity=u&limit=1`);
  expect(r.status).toBe(200);
  return r.body[0].createdAt as string;
}

test("a keyword search as of now scores as the live one, adjacent hits included", async () => {
  const ns = "asof-adjacent-search";
  for (const content of [
    "Melanie: what did you research for the move?",
    "Caroline: adoption agencies, mostly; the research took weeks",
    "Melanie: did you find a good agency?",
    "Caroline: one in Lisbon, near the river",
    "Melanie: I painted a sunrise over the lake last week",
    "Caroline: the lake at sunrise is my favourite view",
    "Melanie: my kids love pottery class",
    "Caroline: pottery is relaxing, I should research a class",
  ])
    await store(ns, content);
  const asOf = await momentNow(ns);
  for (const query of ["research agency", "sunrise lake", "pottery class", "Lisbon river agency"]) {
    const body = { namespace: ns, entity: "u", query, mode: "keyword", limit: 10 };
    const live = await s.json("POST", "/v1/memory/search", body);
    const then = await s.json("POST", "/v1/memory/search", { ...body, asOf });
    expect(live.status).toBe(200);
    expect(then.status).toBe(200);
    const rows = (r: typeof live) => r.body.results.map((h: { id: string; score: number }) => [h.id, h.score]);
    expect(rows(then).map((r: unknown[]) => r[0])).toEqual(rows(live).map((r: unknown[]) => r[0]));
    rows(then).forEach(([, score]: [string, number], i: number) => {
      expect(score).toBeCloseTo(rows(live)[i][1], 9);
    });
  }
});

test("the context block as of a moment places the hit's neighbours of that moment after it", async () => {
  const ns = "asof-adjacent-context";
  await store(ns, "Booked the dentist for Tuesday morning");
  const hit = await store(ns, "We talked about the garden project today");
  const next = await store(ns, "The project needs more tomatoes and compost");
  await store(ns, "Bought a new phone charger");
  const asOf = await momentNow(ns);
  // Since then: the hit no longer holds the query's word, its neighbour is gone.
  expect((await s.json("PATCH", `/v1/memory/${hit}`, { content: "We talked about the allotment today" })).status).toBe(
    200,
  );
  expect((await s.json("DELETE", `/v1/memory/${next}`)).status).toBe(200);

  const body = { namespace: ns, entity: "u", query: "garden" };
  const then = await s.json("POST", "/v1/memory/context", { ...body, asOf });
  expect(then.status).toBe(200);
  expect(then.body.mode).toBe("keyword");
  // The hit as it was, then its neighbour (sharing "project" with it, not a word with the query).
  expect(then.body.memories.map((m: { id: string; content: string }) => [m.id, m.content])).toEqual([
    [hit, "We talked about the garden project today"],
    [next, "The project needs more tomatoes and compost"],
  ]);
  expect(then.body.memories[1].score).toBe(then.body.memories[0].score);
  // Live, the query finds nothing now: the most important and recent memories instead.
  const now = await s.json("POST", "/v1/memory/context", body);
  expect(now.body.mode).toBe("importance");
});
