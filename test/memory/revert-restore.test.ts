// @targets lmdb postgres binary
// Revert and restore (issue 33), checked against the test's own replay: a history with every
// event kind (ADD, UPDATE, MERGE, REPLACE, SKIP_DUPLICATE, KEEP_EXISTING, DELETE, a keyed
// store's UPDATE), then each memory reverted to each of its events must be what the test read
// live right after that event; a revert of a revert gives the state before it; an entity restored
// to every instant between its changes equals the as-of answer at that instant; erased content
// never comes back; writes racing a restore land wholly before it or after it.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { type ChatRequest, type FakeModel, startFakeModel } from "../fake-model";
import { startTestServer, type TestServer } from "../helpers";

const fake: FakeModel = startFakeModel();
let s: TestServer;
const ns = "undo";

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

const q = (params: Record<string, string | number | undefined>) =>
  Object.entries(params)
    .filter(([, v]) => v !== undefined)
    .map(([k, v]) => `${k}=${encodeURIComponent(String(v))}`)
    .join("&");

/** What a revert must bring back: the state fields (no times of the change itself). */
const stateOf = (m: any) =>
  m && {
    id: m.id,
    content: m.content,
    category: m.category,
    importance: m.importance,
    tags: m.tags,
    metadata: m.metadata,
    expiresAt: m.expiresAt,
    observedAt: m.observedAt,
    key: m.key,
  };
const byId = (ms: any[]) => [...ms].sort((a, b) => (a.id < b.id ? -1 : 1)).map(stateOf);

async function current(entity: string): Promise<any[]> {
  const r = await s.json("GET", `/v1/memory?${q({ namespace: ns, entity, limit: 1000 })}`);
  expect(r.status).toBe(200);
  return r.body.memories;
}
async function asOfList(entity: string, at: number): Promise<any[]> {
  const r = await s.json(
    "GET",
    `/v1/memory?${q({ namespace: ns, entity, limit: 1000, asOf: new Date(at).toISOString() })}`,
  );
  expect(r.status).toBe(200);
  return r.body.memories;
}
async function entityEvents(entity: string): Promise<any[]> {
  const r = await s.json("GET", `/v1/memory/events?${q({ namespace: ns, entity, limit: 1000 })}`);
  expect(r.status).toBe(200);
  return (r.body as any[]).reverse();
}
async function memoryEvents(id: string): Promise<any[]> {
  const r = await s.json("GET", `/v1/memory/events?${q({ memoryId: id, limit: 1000 })}`);
  expect(r.status).toBe(200);
  return (r.body as any[]).reverse();
}
const raw = async (entity: string, content: string, extra: Record<string, unknown> = {}) => {
  const r = await s.json("POST", "/v1/memory", { namespace: ns, entity, content, infer: false, ...extra });
  expect({ status: r.status, body: r.body }).toMatchObject({ status: 200 });
  return r.body.memories[0];
};
const patch = async (id: string, body: Record<string, unknown>) => {
  const r = await s.json("PATCH", `/v1/memory/${id}`, body);
  expect(r.status).toBe(200);
  return r.body;
};
const smart = async (entity: string, content: string, reply: (req: ChatRequest) => string) => {
  fake.reply(reply);
  const r = await s.json("POST", "/v1/memory", { namespace: ns, entity, content });
  expect({ status: r.status, body: r.body }).toMatchObject({ status: 200 });
  return r.body;
};
const revert = (id: string, toEvent: string, dryRun?: boolean) =>
  s.json("POST", `/v1/memory/${id}/revert`, dryRun ? { toEvent, dryRun } : { toEvent });
const restore = (entity: string, at: number, dryRun?: boolean) =>
  s.json("POST", "/v1/memory/restore", {
    namespace: ns,
    entity,
    asOf: new Date(at).toISOString(),
    ...(dryRun ? { dryRun } : {}),
  });

/** After each step of the history: every memory's state as read live (absent: not current), by event id. */
const stateAfterEvent = new Map<string, Map<string, any>>();
const historyIds = new Set<string>();

async function step(entity: string, run: () => Promise<unknown>) {
  const before = (await entityEvents(entity)).length;
  await run();
  const events = (await entityEvents(entity)).slice(before);
  expect(events.length).toBeGreaterThan(0);
  const live = new Map((await current(entity)).map((m) => [m.id, m]));
  for (const e of events) {
    stateAfterEvent.set(e.id, live);
    historyIds.add(e.memoryId);
    if (e.mergedFromId) historyIds.add(e.mergedFromId);
  }
}

beforeAll(async () => {
  s = await startTestServer({
    env: { MEMD_LLM_BASE_URL: fake.url, MEMD_LLM_MODEL: "tiny", MEMD_LLM_TIMEOUT_MS: "5000" },
  });
  const u = "u";
  let a: any;
  await step(u, async () => {
    a = await raw(u, "Alice likes green tea", {
      tags: ["drink"],
      metadata: { src: "chat" },
      importance: 0.3,
      observedAt: "2025-05-01T09:30:00.000Z",
    });
  });
  let c: any;
  await step(u, async () => {
    c = await raw(u, "Alice lives in Paris", { category: "personal", ttl: 86400 });
  });
  await step(u, async () => {
    await patch(a.id, { content: "Alice likes jasmine tea", importance: 0.6, tags: ["drink", "tea"], metadata: null });
  });
  await step(u, async () => {
    await smart(u, "Jasmine tea, no sugar", (req) =>
      answer({
        fact: "Alice takes her tea without sugar",
        decision: "MERGE",
        target: handleOf(req, "Alice likes jasmine tea"),
        mergedContent: "Alice likes jasmine tea without sugar",
      }),
    );
  });
  await step(u, async () => {
    await smart(u, "Alice lives in Berlin now, and Alice runs", (req) =>
      answer(
        { fact: "Alice lives in Berlin", decision: "REPLACE", target: handleOf(req, "Alice lives in Paris") },
        { fact: "Alice runs", decision: "ADD", category: "hobby", importance: 0.4 },
      ),
    );
  });
  await step(u, async () => {
    await smart(u, "Alice lives in Berlin and likes jasmine tea", (req) =>
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
  await step(u, async () => {
    await smart(u, "Alice runs no more", (req) =>
      answer({
        fact: "Alice no longer runs",
        decision: "DELETE",
        target: handleOf(req, "Alice runs"),
        reason: "stopped",
      }),
    );
  });
  await step(u, async () => {
    await raw(u, "Favourite colour is blue", { key: "colour" });
  });
  await step(u, async () => {
    await raw(u, "Favourite colour is green", { key: "colour", importance: 0.9 });
  });
  await step(u, async () => {
    expect((await s.json("DELETE", `/v1/memory/${a.id}`)).status).toBe(200);
  });
  expect(c.id).toBeDefined();
});
afterAll(async () => {
  await s.stop();
  fake.stop();
});

describe("revert", () => {
  test("the history holds every event kind", async () => {
    const kinds = new Set((await entityEvents("u")).map((e) => e.event));
    expect([...kinds].sort()).toEqual([
      "ADD",
      "DELETE",
      "KEEP_EXISTING",
      "MERGE",
      "REPLACE",
      "SKIP_DUPLICATE",
      "UPDATE",
    ]);
  });

  test("each memory reverted to each of its events is what it was right after it; a revert of a revert is the state before", async () => {
    let checked = 0;
    for (const id of historyIds) {
      const original = await memoryEvents(id);
      for (const e of original) {
        const want = stateOf(stateAfterEvent.get(e.id)!.get(id));
        const before = await s.json("GET", `/v1/memory/${id}`);
        const count = (await memoryEvents(id)).length;
        const dry = await revert(id, e.id, true);
        expect({ at: e.id, status: dry.status }).toEqual({ at: e.id, status: 200 });
        expect({ at: e.id, after: stateOf(dry.body.after) ?? null }).toEqual({ at: e.id, after: want ?? null });
        expect(dry.body.event).toBeNull();
        // The dry run wrote nothing.
        expect((await memoryEvents(id)).length).toBe(count);
        const r = await revert(id, e.id);
        expect({ at: e.id, status: r.status }).toEqual({ at: e.id, status: 200 });
        const got = await s.json("GET", `/v1/memory/${id}`);
        expect({ at: e.id, got: got.status === 200 ? stateOf(got.body) : null }).toEqual({
          at: e.id,
          got: want ?? null,
        });
        if (r.body.action === "unchanged") {
          expect(r.body.event).toBeNull();
          continue;
        }
        expect(r.body.event).toMatchObject({ memoryId: id, revertOf: e.id, actorKeyId: expect.any(String) });
        expect(r.body.event.event).toBe(
          r.body.action === "add" ? "ADD" : r.body.action === "update" ? "UPDATE" : "DELETE",
        );
        // Revert the revert: back to the event before it.
        const history = await memoryEvents(id);
        const previous = history[history.length - 2];
        const back = await revert(id, previous.id);
        expect(back.status).toBe(200);
        const again = await s.json("GET", `/v1/memory/${id}`);
        expect({ at: e.id, back: again.status === 200 ? stateOf(again.body) : null }).toEqual({
          at: e.id,
          back: before.status === 200 ? stateOf(before.body) : null,
        });
        checked++;
      }
    }
    expect(checked).toBeGreaterThan(5);
  });

  test("unknown events, other memories' events and bad ids are refused", async () => {
    const m = await raw("v", "Bob likes chess");
    const other = await raw("v", "Bob likes go");
    const [otherAdd] = await memoryEvents(other.id);
    expect((await revert(m.id, otherAdd.id)).status).toBe(404);
    expect((await revert(m.id, "999999999")).status).toBe(404);
    expect((await revert(m.id, "abc")).status).toBe(400);
    expect((await revert("01890000-0000-7000-8000-000000000000", otherAdd.id)).status).toBe(404);
  });

  test("a keyed memory brought back while another holds its key is a 409 that says so", async () => {
    const first = await raw("k", "Plan is basic", { key: "plan" });
    const [add] = await memoryEvents(first.id);
    expect((await s.json("DELETE", `/v1/memory/${first.id}`)).status).toBe(200);
    const second = await raw("k", "Plan is pro", { key: "plan" });
    expect(second.id).not.toBe(first.id);
    const r = await revert(first.id, add.id);
    expect(r.status).toBe(409);
    expect(r.body.error.code).toBe("conflict");
    expect(r.body.error.message).toContain(second.id);
    expect((await s.json("DELETE", `/v1/memory/${second.id}`)).status).toBe(200);
    const ok = await revert(first.id, add.id);
    expect(ok.body).toMatchObject({ action: "add", after: { id: first.id, key: "plan", content: "Plan is basic" } });
  });
});

describe("restore", () => {
  test("an entity restored to every instant between its changes equals the as-of answer at that instant", async () => {
    const e = "r";
    const x = await raw(e, "Carol reads novels", { tags: ["books"] });
    const y = await raw(e, "Carol plays piano", { key: "instrument" });
    await patch(x.id, { content: "Carol reads poetry", metadata: { m: 1 } });
    await raw(e, "Carol plays violin", { key: "instrument" });
    expect((await s.json("DELETE", `/v1/memory/${y.id}`)).status).toBe(200);
    await raw(e, "Carol swims");
    await raw(e, "Carol plays cello", { key: "instrument" });
    const times = (await entityEvents(e)).map((ev) => Date.parse(ev.createdAt));
    const instants = [times[0] - 1, ...times];
    const expected = new Map<number, any[]>();
    for (const t of instants) expected.set(t, byId(await asOfList(e, t)));
    // Every instant, in an order that goes back and forth.
    const order = [...instants].reverse().concat(instants.filter((_, i) => i % 2 === 0));
    for (const t of order) {
      const dry = await restore(e, t, true);
      expect(dry.status).toBe(200);
      expect({ t, after: byId(dry.body.memories.filter((m: any) => m.after).map((m: any) => m.after)) }).toEqual({
        t,
        after: expected.get(t)!,
      });
      const r = await restore(e, t);
      expect({ t, status: r.status }).toEqual({ t, status: 200 });
      expect(r.body.events.length).toBe(r.body.changed);
      for (const ev of r.body.events) expect(ev.revertOf).toBe(new Date(t).toISOString());
      expect({ t, now: byId(await current(e)) }).toEqual({ t, now: expected.get(t)! });
      // Nothing left to do: a second restore changes nothing.
      expect((await restore(e, t)).body.changed).toBe(0);
    }
  });

  test("erased content never comes back: revert 410, restore lists it erased", async () => {
    const e = "gone";
    const m = await raw(e, "Dave's phone is 555-0100");
    const [add] = await memoryEvents(m.id);
    const before = Date.parse(add.createdAt);
    const erase = await s.json("POST", "/v1/memory/erase", { namespace: ns, entity: e });
    expect(erase.status).toBe(200);
    const r = await revert(m.id, add.id);
    expect(r.status).toBe(410);
    expect(r.body.error.code).toBe("erased");
    expect(r.body.error.message).toContain("erased");
    const dry = await revert(m.id, add.id, true);
    expect(dry.status).toBe(410);
    const back = await restore(e, before);
    expect(back.status).toBe(200);
    expect(back.body.changed).toBe(0);
    expect(back.body.memories).toEqual([{ id: m.id, action: "erased", fields: [], before: null, after: null }]);
    expect(await current(e)).toEqual([]);
    const text = JSON.stringify(await entityEvents(e));
    expect(text).not.toContain("555-0100");
  });

  test("writes racing a restore land wholly before it or after it", async () => {
    const e = "race";
    for (let i = 0; i < 10; i++) await raw(e, `Erin fact ${i}`);
    const t0 = Date.parse((await entityEvents(e)).at(-1).createdAt);
    const want = byId(await asOfList(e, t0)).map((m) => m.content);
    for (let i = 0; i < 10; i++) await raw(e, `Erin later fact ${i}`);
    let restored: any;
    const writers = Array.from({ length: 3 }, async (_, w) => {
      for (let i = 0; i < 8; i++) await raw(e, `Erin racing ${w}.${i}`);
    });
    const restorer = (async () => {
      await Bun.sleep(5);
      // 409 conflict means "the entity kept changing; try again": a client does.
      for (let i = 0; i < 20; i++) {
        restored = await restore(e, t0);
        if (restored.status !== 409) break;
      }
    })();
    await Promise.all([...writers, restorer]);
    expect(restored.status).toBe(200);
    const all = await entityEvents(e);
    const mine = all.filter((ev) => ev.revertOf === new Date(t0).toISOString());
    expect(mine.length).toBe(restored.body.changed);
    // The restore's events are one block: no other write of the entity between them.
    const first = all.indexOf(mine[0]);
    expect(all.slice(first, first + mine.length)).toEqual(mine);
    const end = Date.parse(mine.at(-1).createdAt);
    // Right after it: exactly the entity as it was at t0.
    expect(byId(await asOfList(e, end)).map((m) => m.content)).toEqual(want);
    // Now: that, plus the stores that came after it.
    const after = all.slice(first + mine.length).map((ev) => ev.newContent);
    expect((await current(e)).map((m) => m.content).sort()).toEqual([...want, ...after].sort());
  });
});

describe("Idempotency-Key", () => {
  test("a revert or restore sent twice with one key is done once; the second gets the first answer", async () => {
    const m = await raw("idem", "Gus likes plums");
    const [add] = await memoryEvents(m.id);
    await patch(m.id, { content: "Gus likes pears" });
    const send = (path: string, body: object, key: string) =>
      s.api("POST", path, body, { headers: { "content-type": "application/json", "idempotency-key": key } });
    const first = await send(`/v1/memory/${m.id}/revert`, { toEvent: add.id }, "rev-1");
    const again = await send(`/v1/memory/${m.id}/revert`, { toEvent: add.id }, "rev-1");
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    expect(await again.json()).toEqual(await first.json());
    expect((await memoryEvents(m.id)).length).toBe(3);
    const at = new Date(Date.parse(add.createdAt)).toISOString();
    await patch(m.id, { content: "Gus likes figs" });
    const r1 = await send("/v1/memory/restore", { namespace: ns, entity: "idem", asOf: at }, "res-1");
    const r2 = await send("/v1/memory/restore", { namespace: ns, entity: "idem", asOf: at }, "res-1");
    expect(r2.headers.get("idempotent-replayed")).toBe("true");
    expect(await r2.json()).toEqual(await r1.json());
    expect((await memoryEvents(m.id)).length).toBe(5);
    expect((await s.json("GET", `/v1/memory/${m.id}`)).body.content).toBe("Gus likes plums");
  });
});
