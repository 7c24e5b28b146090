// @targets lmdb postgres pgbouncer binary
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { startTestServer, type TestServer } from "../helpers";

let s: TestServer;
beforeAll(async () => (s = await startTestServer()));
afterAll(() => s.stop());

const iso = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const uuidv7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

describe("raw store (infer: false)", () => {
  test("round-trips every field and records an ADD event", async () => {
    const req = {
      namespace: "acme",
      entity: "user-1",
      content: "  Prefers tea over coffee ☕  ",
      infer: false,
      tags: ["drinks", "pref"],
      metadata: { a: 1, nested: { b: [true, null, "x"] } },
      source: "chat-42",
      category: "preference",
      importance: 0.9,
    };
    const r = await s.json("POST", "/v1/memory", req);
    expect(r.status).toBe(200);
    expect(r.body.skipped).toBe(0);
    expect(r.body.conflicts).toBe(0);
    expect(r.body.memories).toHaveLength(1);
    const m = r.body.memories[0];
    expect(m.id).toMatch(uuidv7);
    expect(m).toMatchObject({
      namespace: "acme",
      entity: "user-1",
      content: req.content,
      category: "preference",
      importance: 0.9,
      tags: req.tags,
      metadata: req.metadata,
      source: "chat-42",
      event: "ADD",
    });
    expect(m.createdAt).toMatch(iso);

    const got = await s.json("GET", `/v1/memory/${m.id}`);
    expect(got.status).toBe(200);
    expect(got.body).toMatchObject({
      id: m.id,
      content: req.content,
      tags: req.tags,
      metadata: req.metadata,
      source: "chat-42",
    });

    const ev = await s.json("GET", `/v1/memory/events?namespace=acme&memoryId=${m.id}`);
    expect(ev.status).toBe(200);
    expect(ev.body).toEqual([
      {
        id: expect.any(String),
        memoryId: m.id,
        namespace: "acme",
        entity: "user-1",
        event: "ADD",
        oldContent: null,
        newContent: req.content,
        mergedFromId: null,
        reason: null,
        createdAt: m.createdAt,
        actorKeyId: "root",
        // Not given: observed when stored (docs/time.md).
        observedAt: m.createdAt,
        oldObservedAt: null,
      },
    ]);
    expect(m.observedAt).toBe(m.createdAt);
  });

  test("fields not given are absent, not null or empty; defaults documented", async () => {
    const r = await s.json("POST", "/v1/memory", { namespace: "acme", entity: "user-2", content: "x", infer: false });
    expect(r.status).toBe(200);
    const m = r.body.memories[0];
    expect(Object.keys(m).sort()).toEqual([
      "category",
      "content",
      "createdAt",
      "entity",
      "event",
      "id",
      "importance",
      "namespace",
      "observedAt",
    ]);
    expect(m.category).toBe("general");
    expect(m.importance).toBe(0.5);
  });

  test("a lone surrogate (a \\u escape) is stored as one U+FFFD, on either backend, in every field", async () => {
    const raw =
      '{"namespace":"acme","entity":"user-s","content":"lone \\ud800 x","tags":["t\\udc00"],"metadata":{"k\\ud800":"v"},"infer":false}';
    const r = await s.api("POST", "/v1/memory", raw);
    expect(r.status).toBe(200);
    const id = ((await r.json()) as any).memories[0].id;
    const m = (await s.json("GET", `/v1/memory/${id}`)).body;
    expect([m.content, m.tags, m.metadata]).toEqual(["lone \ufffd x", ["t\ufffd"], { "k\ufffd": "v" }]);
    const events = (await s.json("GET", `/v1/memory/events?memoryId=${id}`)).body;
    expect(events[0].newContent).toBe("lone \ufffd x");
  });

  test("ids are time-ordered and many stores in one millisecond get distinct, increasing times", async () => {
    const results = await Promise.all(
      Array.from({ length: 50 }, (_, i) =>
        s.json("POST", "/v1/memory", { namespace: "burst", entity: "e", content: `fact ${i}`, infer: false }),
      ),
    );
    const times = results.map((r) => Date.parse(r.body.memories[0].createdAt));
    expect(new Set(times).size).toBe(50);
    const ev = await s.json("GET", "/v1/memory/events?namespace=burst&limit=1000");
    const evTimes = ev.body.map((e: any) => e.createdAt);
    expect(evTimes).toEqual([...evTimes].sort().reverse());
    expect(new Set(evTimes).size).toBe(50);
  });

  test("infer omitted without a configured model uses the built-in extractor", async () => {
    const r = await s.api("POST", "/v1/memory", {
      namespace: "acme",
      entity: "u",
      content: "Likes jazz. Plays the piano.",
    });
    expect(r.status).toBe(200);
    expect(r.headers.get("x-memd-extractor")).toBe("builtin");
    const body = (await r.json()) as { memories: { content: string; event: string }[] };
    expect(body.memories.map((m) => [m.content, m.event])).toEqual([
      ["Likes jazz.", "ADD"],
      ["Plays the piano.", "ADD"],
    ]);
  });

  test("GET /v1/memory lists current memories of an entity", async () => {
    await s.json("POST", "/v1/memory", { namespace: "list", entity: "a", content: "one", infer: false });
    await s.json("POST", "/v1/memory", { namespace: "list", entity: "a", content: "two", infer: false });
    await s.json("POST", "/v1/memory", { namespace: "list", entity: "b", content: "three", infer: false });
    const a = await s.json("GET", "/v1/memory?namespace=list&entity=a");
    expect(a.body.memories.map((m: any) => m.content)).toEqual(["two", "one"]);
    const all = await s.json("GET", "/v1/memory?namespace=list");
    expect(all.body.memories).toHaveLength(3);
  });

  test("DELETE removes a memory from reads and records DELETE with reason deleted", async () => {
    const r = await s.json("POST", "/v1/memory", { namespace: "del", entity: "a", content: "temp", infer: false });
    const id = r.body.memories[0].id;
    expect((await s.json("DELETE", `/v1/memory/${id}`)).status).toBe(200);
    expect((await s.json("GET", `/v1/memory/${id}`)).status).toBe(404);
    expect((await s.json("DELETE", `/v1/memory/${id}`)).status).toBe(404);
    const ev = await s.json("GET", `/v1/memory/events?namespace=del&memoryId=${id}`);
    expect(ev.body.map((e: any) => [e.event, e.oldContent, e.reason])).toEqual([
      ["DELETE", "temp", "deleted"],
      ["ADD", null, null],
    ]);
    const diff = await s.json("POST", "/v1/memory/diff", { namespace: "del" });
    expect(diff.body.deleted).toEqual([]);
    expect(diff.body.created).toEqual([]);
  });
});
