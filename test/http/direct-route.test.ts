// @targets lmdb postgres binary
// The raw store's direct route (src/http/direct.ts): over HTTP it must answer exactly as the app's
// own route, with the same headers, log line and metrics; whatever it does not serve goes to the
// app, body and all. The last part checks directRoutes itself: which requests it serves.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { t } from "elysia";
import { type DirectKey, directRoutes } from "../../src/http/direct";
import { createLogger } from "../../src/log";
import { rootSecret, startTestServer, type TestServer } from "../helpers";

const store = (content: string, extra: Record<string, unknown> = {}) => ({
  namespace: "direct",
  entity: "u1",
  content,
  infer: false,
  ...extra,
});

describe("POST /v1/memory (infer: false) over HTTP", () => {
  let s: TestServer;
  beforeAll(async () => (s = await startTestServer({ env: { MEMD_RATE_LIMIT: "1000:1000" } })));
  afterAll(() => s.stop());

  const counted = async (status: number) => {
    const text = await (await s.api("GET", "/metrics")).text();
    const line = text
      .split("\n")
      .find((l) => l.startsWith(`memd_http_requests_total{method="POST",route="/v1/memory",status="${status}"}`));
    return line ? Number(line.split(" ").at(-1)) : 0;
  };

  test("answers 200 with the memory, JSON content type, the caller's request id, embedding headers, one log line and one count", async () => {
    const before = await counted(200);
    const r = await s.api(
      "POST",
      "/v1/memory",
      store("Prefers tea", { tags: ["drink"], metadata: { constructor: 1 } }),
      {
        headers: { "content-type": "application/json", "x-request-id": "direct-1" },
      },
    );
    expect(r.status).toBe(200);
    expect(r.headers.get("content-type")).toBe("application/json;charset=utf-8");
    expect(r.headers.get("x-request-id")).toBe("direct-1");
    expect(r.headers.get("x-memd-embed-calls")).toBe("0");
    expect(r.headers.get("x-memd-embed-tokens")).toBe("0");
    const body = (await r.json()) as any;
    expect(body).toEqual({
      memories: [
        {
          id: expect.any(String),
          namespace: "direct",
          entity: "u1",
          content: "Prefers tea",
          category: "general",
          importance: 0.5,
          tags: ["drink"],
          metadata: { constructor: 1 },
          createdAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
          observedAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
          event: "ADD",
        },
      ],
      skipped: 0,
      conflicts: 0,
    });
    const got = await s.json("GET", `/v1/memory/${body.memories[0].id}`);
    expect(got.body.content).toBe("Prefers tea");
    await s.settleLogs();
    const lines = s.logs.filter((l) => l.includes('"requestId":"direct-1"')).map((l) => JSON.parse(l));
    expect(lines).toEqual([
      {
        time: expect.any(String),
        level: "info",
        msg: "request",
        method: "POST",
        path: "/v1/memory",
        status: 200,
        ms: expect.any(Number),
        requestId: "direct-1",
        keyId: "root",
      },
    ]);
    expect(await counted(200)).toBe(before + 1);
  });

  test("a request id that is not sane is replaced by a new one", async () => {
    const r = await s.api("POST", "/v1/memory", store("x"), {
      headers: { "content-type": "application/json", "x-request-id": "x".repeat(201) },
    });
    expect(r.status).toBe(200);
    expect(r.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/);
  });

  test("a body sent in chunks, without Content-Length, is stored", async () => {
    const bytes = new TextEncoder().encode(JSON.stringify(store("chunked body")));
    const body = new ReadableStream({
      start(c) {
        c.enqueue(bytes.subarray(0, 10));
        c.enqueue(bytes.subarray(10));
        c.close();
      },
    });
    const r = await fetch(`${s.url}/v1/memory`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${rootSecret}` },
      body,
    });
    expect(r.status).toBe(200);
    expect(((await r.json()) as { memories: { content: string }[] }).memories[0].content).toBe("chunked body");
  });

  test("Content-Type with a charset is JSON too", async () => {
    const r = await s.api("POST", "/v1/memory", JSON.stringify(store("with charset")), {
      headers: { "content-type": "Application/JSON; charset=utf-8" },
    });
    expect(r.status).toBe(200);
  });

  test("what the route does not serve is answered by the app, with its words", async () => {
    const before = await counted(400);
    const bad = new Uint8Array([
      ...new TextEncoder().encode('{"namespace":"direct","entity":"u1","content":"'),
      0xff,
      0x22,
      0x7d,
    ]);
    const cases: [string, Response | Promise<Response>, number, string][] = [
      [
        "invalid UTF-8",
        s.api("POST", "/v1/memory", bad, { headers: { "content-type": "application/json" } }),
        400,
        "not valid UTF-8",
      ],
      [
        "not JSON",
        s.api("POST", "/v1/memory", "{", { headers: { "content-type": "application/json" } }),
        400,
        "not valid JSON",
      ],
      ["blank content", s.api("POST", "/v1/memory", store(" ")), 400, "content: must be a string that is not blank"],
      ["unknown field", s.api("POST", "/v1/memory", store("x", { colour: "red" })), 400, "colour"],
      ["importance as a string", s.api("POST", "/v1/memory", store("x", { importance: "0.5" })), 400, "importance"],
      [
        "__proto__ in metadata",
        s.api(
          "POST",
          "/v1/memory",
          `{"namespace":"direct","entity":"u1","content":"x","infer":false,"metadata":{"__proto__":{}}}`,
          { headers: { "content-type": "application/json" } },
        ),
        400,
        "metadata.__proto__",
      ],
      ["a repeated query parameter", s.api("POST", "/v1/memory?a=1&a=2", store("x")), 400, "a: may be given only once"],
      ["no key", s.api("POST", "/v1/memory", store("x"), { key: null }), 401, "Authorization"],
      [
        "a wrong key",
        s.api("POST", "/v1/memory", store("x"), { key: "memd_wrong_key_0123456789" }),
        401,
        "unknown or revoked",
      ],
      [
        "text/plain",
        s.api("POST", "/v1/memory", JSON.stringify(store("x")), { headers: { "content-type": "text/plain" } }),
        415,
        "Content-Type: application/json",
      ],
    ];
    for (const [name, pending, status, words] of cases) {
      const r = await pending;
      const text = await r.text();
      expect({ name, status: r.status }).toEqual({ name, status });
      expect(r.headers.get("content-type")).toBe("application/json");
      expect(r.headers.get("x-request-id")).toBeString();
      expect(JSON.parse(text).error.message).toContain(words);
    }
    // The repeated query parameter is refused before routing, so the app counts it unmatched.
    expect(await counted(400)).toBe(before + 6);
  });

  test("keys without the permission or the namespace get 403; with an Idempotency-Key a repeat is replayed", async () => {
    const reader = (await s.json("POST", "/v1/keys", { name: "r", permission: "read", namespaces: ["*"] })).body.secret;
    const other = (await s.json("POST", "/v1/keys", { name: "o", permission: "read_write", namespaces: ["other"] }))
      .body.secret;
    const lacks = await s.json("POST", "/v1/memory", store("x"), { key: reader });
    expect(lacks.status).toBe(403);
    expect(lacks.body.error.message).toBe("this key lacks the read_write permission");
    const outside = await s.json("POST", "/v1/memory", store("x"), { key: other });
    expect(outside.status).toBe(403);
    expect(outside.body.error.message).toBe('this key does not cover namespace "direct"');
    const once = () =>
      s.api("POST", "/v1/memory", store("once"), {
        headers: { "content-type": "application/json", "idempotency-key": "direct-once" },
      });
    const first = await once();
    const again = await once();
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    expect(await again.json()).toEqual(await first.json());
  });
});

describe("POST /v1/memory over HTTP with a tight rate limit", () => {
  let s: TestServer;
  beforeAll(async () => (s = await startTestServer({ env: { MEMD_RATE_LIMIT: "0.1:2" } })));
  afterAll(() => s.stop());

  test("the burst is served, then 429 with Retry-After: one token per request, however it is answered", async () => {
    expect((await s.api("POST", "/v1/memory", store("a"))).status).toBe(200);
    expect((await s.api("POST", "/v1/memory", store("b"))).status).toBe(200);
    const over = await s.json("POST", "/v1/memory", store("c"));
    expect(over.status).toBe(429);
    expect(over.body.error.code).toBe("rate_limited");
    expect(Number(over.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    // Nothing of the refused store was written.
    const stored = await s.server.core.storage.currentMemories({ namespace: "direct" }, 10);
    expect(stored.map((m) => m.content).sort()).toEqual(["a", "b"]);
  });
});

describe("directRoutes: which requests it serves", () => {
  type Key = DirectKey & { write: boolean };
  const keys: Record<string, Key> = { w: { id: "w", write: true }, r: { id: "r", write: false } };
  const taken: string[] = [];
  const finished: number[] = [];
  const handedOver: string[] = [];
  const routes = directRoutes<Key>(
    [
      {
        path: "/x",
        allows: (k) => k.write,
        body: t.Object({ n: t.Number(), raw: t.Optional(t.Boolean()) }, { additionalProperties: false }),
        serves: (request, body) => body.raw === true && request.headers.get("idempotency-key") === null,
        async handle(body, key, headers) {
          headers["x-seen"] = key.id;
          if (body.n < 0) throw new Error("boom");
          return { n: body.n };
        },
      },
    ],
    {
      logger: createLogger("error", () => {}),
      authenticate(request) {
        const k = keys[request.headers.get("authorization") ?? ""];
        if (!k) throw new Error("401");
        return request.headers.get("x-async") ? Promise.resolve(k) : k;
      },
      take: (id) => {
        taken.push(id);
      },
      finish: (_request, _route, status) => {
        finished.push(status);
      },
    },
    async (request) => {
      handedOver.push(await request.text());
      return new Response("app", { status: 299 });
    },
  );
  const post = (body: string, headers: Record<string, string> = {}, query = "") =>
    routes["/x"].POST(
      new Request(`http://localhost/x${query}`, {
        method: "POST",
        body,
        headers: { authorization: "w", "content-type": "application/json", ...headers },
      }),
    );

  test("serves the plain case once: one token, one finish, the handler's headers", async () => {
    const r = await post('{"n":1,"raw":true}', { "x-async": "1" });
    expect(r.status).toBe(200);
    expect(r.headers.get("x-seen")).toBe("w");
    expect(await r.json()).toEqual({ n: 1 });
    expect(taken).toEqual(["w"]);
    expect(finished).toEqual([200]);
  });

  test("a handler that throws answers the mapped error, and is counted", async () => {
    const r = await post('{"n":-1,"raw":true}');
    expect(r.status).toBe(500);
    expect(await r.json()).toEqual({ error: { code: "internal", message: "internal error" } });
    expect(finished.at(-1)).toBe(500);
  });

  test("hands everything else to the app, body intact, having taken no token", async () => {
    taken.length = 0;
    finished.length = 0;
    const cases: [string, Record<string, string>, string][] = [
      ['{"n":1}', {}, ""], // serves() says no
      ['{"n":1,"raw":true}', { "idempotency-key": "k" }, ""],
      ['{"n":1,"raw":true}', {}, "?q=1"],
      ['{"n":"1","raw":true}', {}, ""], // fails the schema
      ['{"n":1,"raw":true', {}, ""], // not JSON
      ['{"n":1,"raw":true}', { authorization: "r" }, ""], // not allowed
      ['{"n":1,"raw":true}', { authorization: "nobody" }, ""], // authentication throws
      ['{"n":1,"raw":true}', { "content-type": "text/plain" }, ""],
    ];
    for (const [body, headers, query] of cases) {
      const r = await post(body, headers, query);
      expect({ body, headers, query, status: r.status }).toEqual({ body, headers, query, status: 299 });
    }
    expect(handedOver).toEqual(cases.map(([body]) => body));
    expect(taken).toEqual([]);
    expect(finished).toEqual([]);
  });
});
