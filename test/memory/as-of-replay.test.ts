// @targets lmdb postgres binary
// Memories as of a moment: a history with every event kind (ADD, UPDATE, MERGE, REPLACE,
// SKIP_DUPLICATE, KEEP_EXISTING, DELETE, TTL expiry, and an erasure beside it), then the as-of
// answers of list, get and search at every instant around each change, checked against a
// replay the test computes on its own: the current memories it read after each step.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { type ChatRequest, type FakeModel, startFakeModel } from "../fake-model";
import { startTestServer, type TestServer } from "../helpers";

const fake: FakeModel = startFakeModel();
let s: TestServer;
const ns = "time";
const entity = "u";

const answer = (...operations: object[]) => JSON.stringify({ operations });
/** The handle the model was offered for a memory's content. */
function handleOf(r: ChatRequest, content: string): string | undefined {
  const user = String(r.messages.find((m) => m.role === "user")?.content);
  const section = user.split("EXISTING MEMORIES:\n")[1].split("\n\nNEW CONTENT:")[0];
  for (const line of section.split("\n")) {
    const m = /^(m\d+) \[[^\]]*\] (.*)$/.exec(line);
    if (m && m[2] === content) return m[1];
  }
  return undefined;
}

const iso = (ms: number) => new Date(ms).toISOString();
const q = (params: Record<string, string | number | undefined>) =>
  Object.entries(params)
    .filter(([, v]) => v !== undefined)
    .map(([k, v]) => `${k}=${encodeURIComponent(String(v))}`)
    .join("&");

/** Every page of a list, following nextCursor (small pages, so paging is exercised). */
async function listAll(params: Record<string, string | number | undefined>) {
  const out: any[] = [];
  let cursor: string | undefined;
  for (let i = 0; i < 100; i++) {
    const r = await s.json("GET", `/v1/memory?${q({ namespace: ns, limit: 2, ...params, cursor })}`);
    expect(r.status).toBe(200);
    out.push(...r.body.memories);
    if (r.body.nextCursor === null) return out;
    cursor = r.body.nextCursor;
  }
  throw new Error("more than 100 pages");
}

async function entityEvents(e: string): Promise<any[]> {
  const r = await s.json("GET", `/v1/memory/events?${q({ namespace: ns, entity: e, limit: 1000 })}`);
  expect(r.status).toBe(200);
  return (r.body as any[]).reverse();
}

const raw = async (content: string, extra: Record<string, unknown> = {}, e = entity) => {
  const r = await s.json("POST", "/v1/memory", { namespace: ns, entity: e, content, infer: false, ...extra });
  expect(r.status).toBe(200);
  return r.body.memories[0];
};
const patch = async (id: string, body: Record<string, unknown>) => {
  const r = await s.json("PATCH", `/v1/memory/${id}`, body);
  expect(r.status).toBe(200);
  return r.body;
};
const smart = async (content: string, reply: (req: ChatRequest) => string, extra: Record<string, unknown> = {}) => {
  fake.reply(reply);
  const r = await s.json("POST", "/v1/memory", { namespace: ns, entity, content, ...extra });
  expect({ status: r.status, body: r.body, asked: fake.requests.at(-1)?.messages.at(-1) }).toMatchObject({
    status: 200,
  });
  return r.body;
};

/** After each step: the current memories (read live, not from the trail) and the step's event times. */
interface Step {
  name: string;
  first: number;
  last: number;
  current: any[];
}
const steps: Step[] = [];
const ids = new Set<string>();
let observedA = 0;

async function step(name: string, run: () => Promise<unknown>) {
  const before = (await entityEvents(entity)).length;
  await run();
  const events = (await entityEvents(entity)).slice(before);
  expect(events.length).toBeGreaterThan(0);
  const current = await listAll({ entity });
  for (const m of current) ids.add(m.id);
  for (const e of events) {
    ids.add(e.memoryId);
    if (e.mergedFromId) ids.add(e.mergedFromId);
  }
  const times = events.map((e) => Date.parse(e.createdAt));
  steps.push({ name, first: Math.min(...times), last: Math.max(...times), current });
}

/** The independent replay: the memories current after the last step done by `t`, less those expired by then. */
function expectedAt(t: number): any[] {
  let state: any[] = [];
  for (const st of steps) if (st.last <= t) state = st.current;
  return state.filter((m) => m.expiresAt === undefined || Date.parse(m.expiresAt) > t);
}

let ttlExpiresAt = 0;
let erasedIds: string[] = [];
let erasedTimes: number[] = [];

beforeAll(async () => {
  s = await startTestServer({
    env: { MEMD_LLM_BASE_URL: fake.url, MEMD_LLM_MODEL: "tiny", MEMD_LLM_TIMEOUT_MS: "5000" },
  });
  observedA = Date.parse("2025-05-01T09:30:00.000Z");
  let a: any;
  let c: any;
  await step("ADD a (observed in the past, tags, metadata)", async () => {
    a = await raw("Alice likes green tea", {
      tags: ["drink"],
      metadata: { src: "chat" },
      importance: 0.3,
      observedAt: iso(observedA),
      source: "conversation 1",
    });
  });
  await step("ADD c", async () => {
    c = await raw("Alice lives in Paris", { category: "personal" });
  });
  await step("UPDATE a: content, importance, tags, metadata", async () => {
    await patch(a.id, { content: "Alice likes jasmine tea", importance: 0.6, tags: ["drink", "tea"], metadata: null });
  });
  await step("UPDATE c: only its observed time", async () => {
    await patch(c.id, { observedAt: "2025-06-01T00:00:00Z" });
  });
  await step("MERGE into a", async () => {
    await smart("Jasmine tea, no sugar", (req) =>
      answer({
        fact: "Alice takes her tea without sugar",
        decision: "MERGE",
        target: handleOf(req, "Alice likes jasmine tea"),
        mergedContent: "Alice likes jasmine tea without sugar",
      }),
    );
  });
  await step("REPLACE c and ADD e, one answer", async () => {
    await smart(
      "Alice lives in Berlin since last week, and Alice runs",
      (req) =>
        answer(
          { fact: "Alice lives in Berlin", decision: "REPLACE", target: handleOf(req, "Alice lives in Paris") },
          { fact: "Alice runs", decision: "ADD", category: "hobby", importance: 0.4 },
        ),
      { observedAt: "2025-07-01T12:00:00Z" },
    );
  });
  await step("SKIP_DUPLICATE and KEEP_EXISTING: nothing changes", async () => {
    await smart("Alice lives in Berlin and likes jasmine tea", (req) =>
      answer(
        { fact: "Alice is in Berlin", decision: "SKIP_DUPLICATE", target: handleOf(req, "Alice lives in Berlin") },
        {
          fact: "Alice likes coffee",
          decision: "KEEP_EXISTING",
          target: handleOf(req, "Alice likes jasmine tea without sugar"),
          reason: "tea is the stronger signal",
        },
      ),
    );
  });
  await step("DELETE e by the model", async () => {
    await smart("Alice runs no more", (req) =>
      answer({
        fact: "Alice no longer runs",
        decision: "DELETE",
        target: handleOf(req, "Alice runs"),
        reason: "stopped",
      }),
    );
  });
  await step("DELETE a by the API", async () => {
    expect((await s.json("DELETE", `/v1/memory/${a.id}`)).status).toBe(200);
  });
  await step("ADD b with a TTL", async () => {
    const b = await raw("Alice is at the airport", { ttl: 1 });
    ttlExpiresAt = Date.parse(b.expiresAt);
  });
  // The sweeper writes the expiry's DELETE (within 2 s of it); reads drop b at expiresAt already.
  await step("TTL expiry of b", async () => {
    const deadline = ttlExpiresAt + 5000;
    for (;;) {
      const last = (await entityEvents(entity)).at(-1);
      if (last?.event === "DELETE" && last.reason === "expired") return;
      if (Date.now() > deadline) throw new Error("the sweeper did not expire b within 5 s");
      await Bun.sleep(50);
    }
  });
  await step("ADD f", async () => {
    await raw("Alice has a bike");
  });

  // Another entity of the namespace, erased: it never comes back in an as-of answer.
  const g = await raw("Gone has a secret", { tags: ["x"] }, "gone");
  await patch(g.id, { content: "Gone has a bigger secret" });
  erasedIds = [g.id];
  erasedTimes = (await entityEvents("gone")).map((ev) => Date.parse(ev.createdAt));
  expect((await s.json("POST", "/v1/memory/erase", { namespace: ns, entity: "gone" })).status).toBe(200);
}, 60_000);

afterAll(async () => {
  await s.stop();
  await fake.stop();
});

/** Every instant where the answer may change, and one just before each. */
function instants(): number[] {
  const out = new Set<number>();
  for (const st of steps) {
    out.add(st.first - 1);
    out.add(st.last);
  }
  out.add(ttlExpiresAt - 1);
  out.add(ttlExpiresAt);
  return [...out].sort((x, y) => x - y);
}

describe("as of a moment: list and get", () => {
  test("the history holds every event kind", async () => {
    const kinds = new Set((await entityEvents(entity)).map((e) => e.event));
    expect([...kinds].sort()).toEqual([
      "ADD",
      "DELETE",
      "KEEP_EXISTING",
      "MERGE",
      "REPLACE",
      "SKIP_DUPLICATE",
      "UPDATE",
    ]);
    const reasons = (await entityEvents(entity)).filter((e) => e.event === "DELETE").map((e) => e.reason);
    expect(reasons).toEqual(["stopped", "deleted", "expired"]);
  });

  test("the list at every instant around every change equals the replay, paged", async () => {
    for (const t of instants()) {
      const got = await listAll({ entity, asOf: iso(t) });
      expect({ t: iso(t), got }).toEqual({ t: iso(t), got: expectedAt(t) });
    }
  });

  test("each memory by id at every instant: as it was, or 404 when it was not current", async () => {
    for (const t of instants())
      for (const id of ids) {
        const want = expectedAt(t).find((m) => m.id === id);
        const r = await s.json("GET", `/v1/memory/${id}?asOf=${encodeURIComponent(iso(t))}`);
        expect({ t: iso(t), id, status: r.status, body: want ? r.body : undefined }).toEqual({
          t: iso(t),
          id,
          status: want ? 200 : 404,
          body: want,
        });
      }
  });

  test("filters apply to the versions of that moment", async () => {
    for (const t of instants()) {
      const want = expectedAt(t);
      expect((await listAll({ entity, asOf: iso(t), tag: "tea" })).map((m) => m.id)).toEqual(
        want.filter((m) => m.tags?.includes("tea")).map((m) => m.id),
      );
      expect((await listAll({ entity, asOf: iso(t), category: "personal" })).map((m) => m.id)).toEqual(
        want.filter((m) => m.category === "personal").map((m) => m.id),
      );
      const cut = Date.parse("2025-06-15T00:00:00Z");
      expect((await listAll({ entity, asOf: iso(t), observedBefore: iso(cut) })).map((m) => m.id)).toEqual(
        want.filter((m) => Date.parse(m.observedAt) < cut).map((m) => m.id),
      );
    }
  });

  test("the whole namespace at every instant: the same replay (the erased entity stays absent), paged", async () => {
    for (const t of instants()) {
      const got = await listAll({ asOf: iso(t) });
      expect({ t: iso(t), got }).toEqual({ t: iso(t), got: expectedAt(t) });
    }
    expect(await listAll({ asOf: iso(Date.now()) })).toEqual(await listAll({ entity }));
  });

  test("before the first event: empty; now: the current memories", async () => {
    expect(await listAll({ entity, asOf: "2000-01-01" })).toEqual([]);
    expect(await listAll({ entity, asOf: iso(Date.now()) })).toEqual(await listAll({ entity }));
  });

  test("an erased entity is absent at every instant, before its erasure too", async () => {
    for (const t of erasedTimes) {
      expect(await listAll({ entity: "gone", asOf: iso(t) })).toEqual([]);
      for (const id of erasedIds)
        expect((await s.json("GET", `/v1/memory/${id}?asOf=${encodeURIComponent(iso(t))}`)).status).toBe(404);
    }
  });

  test("a REPLACE keeps the replaced fact's observed date on its old side", async () => {
    const replace = (await entityEvents(entity)).find((e) => e.event === "REPLACE");
    expect(replace.oldObservedAt).toBe("2025-06-01T00:00:00.000Z");
    expect(replace.observedAt).toBe("2025-07-01T12:00:00.000Z");
  });
});

describe("as of a moment: keyword search in one entity", () => {
  test("hits are the memories of that moment holding the word, best first", async () => {
    for (const t of instants()) {
      const r = await s.json("POST", "/v1/memory/search", {
        namespace: ns,
        entity,
        query: "Alice tea",
        asOf: iso(t),
        mode: "keyword",
        limit: 100,
      });
      expect(r.status).toBe(200);
      expect(r.body.mode).toBe("keyword");
      const want = expectedAt(t).filter((m) => /\b(alice|tea)\b/i.test(m.content));
      expect(r.body.results.map((h: any) => h.id).sort()).toEqual(want.map((m) => m.id).sort());
      for (const h of r.body.results) {
        const { score, ...memory } = h;
        expect(memory).toEqual(want.find((m) => m.id === h.id));
      }
      const scores = r.body.results.map((h: any) => h.score);
      expect(scores).toEqual([...scores].sort((x, y) => y - x));
    }
  });
});

describe("refusals, in words", () => {
  test.each([
    ["list in the future", "GET", `/v1/memory?namespace=${ns}&entity=u&asOf=2999-01-01`, undefined, "asOf"],
    ["list, not a time", "GET", `/v1/memory?namespace=${ns}&entity=u&asOf=2025-02-30`, undefined, "asOf"],
    ["get in the future", "GET", "/v1/memory/00000000-0000-7000-8000-000000000000?asOf=2999-01-01", undefined, "asOf"],
    [
      "search without an entity",
      "POST",
      "/v1/memory/search",
      { namespace: ns, query: "tea", asOf: "2025-01-01" },
      "entity",
    ],
    [
      "semantic search as of a moment",
      "POST",
      "/v1/memory/search",
      { namespace: ns, entity, query: "tea", asOf: "2025-01-01", mode: "semantic" },
      "mode",
    ],
    [
      "search in the future",
      "POST",
      "/v1/memory/search",
      { namespace: ns, entity, query: "tea", asOf: "2999-01-01" },
      "asOf",
    ],
  ])("%s: 400 naming the field", async (_name, method, path, body, field) => {
    const r = await s.json(method, path, body);
    expect(r.status).toBe(400);
    expect(r.body.error.code).toBe("invalid_request");
    expect(r.body.error.details.map((d: any) => d.field)).toContain(field);
  });
});

describe("as of a moment: the context block", () => {
  test("holds exactly the memories of that moment, each dated by when it was observed", async () => {
    for (const t of instants()) {
      const r = await s.json("POST", "/v1/memory/context", { namespace: ns, entity, asOf: iso(t), maxTokens: 20000 });
      expect(r.status).toBe(200);
      const want = expectedAt(t);
      expect(r.body.memories.map((m: any) => m.id).sort()).toEqual(want.map((m) => m.id).sort());
      for (const m of want) expect(r.body.context).toContain(`- [${m.observedAt.slice(0, 10)}] ${m.content}`);
    }
    const q = await s.json("POST", "/v1/memory/context", {
      namespace: ns,
      entity,
      query: "tea",
      asOf: iso(steps[2].last),
    });
    expect(q.body.mode).toBe("keyword");
    // The hit, then the memory stored next to it then (sharing "Alice" with it), as a live block places it.
    expect(q.body.memories.map((m: any) => m.content)).toEqual(["Alice likes jasmine tea", "Alice lives in Paris"]);
    expect(q.body.context).toContain("- [2025-05-01] Alice likes jasmine tea");
  });
});
