// @targets lmdb postgres binary
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { rootSecret, startTestServer, type TestServer } from "../helpers";

let s: TestServer;
let readKey: string;
beforeAll(async () => {
  s = await startTestServer();
  const { createKey } = await import("../../src/keys/service");
  readKey = (await createKey(s.server.core.storage, { name: "reader", permission: "read", namespaces: ["*"] })).secret;
});
afterAll(() => s.stop());

const ok = { namespace: "n", entity: "e", content: "c", infer: false };
const json = { "content-type": "application/json" };

interface Scenario {
  name: string;
  method: string;
  path: string;
  body?: string;
  headers?: Record<string, string>;
  key?: string | null;
  status: number;
  code: string;
  field?: string;
}

const scenarios: Scenario[] = [
  { name: "bad JSON", method: "POST", path: "/v1/memory", body: '{"namespace":', status: 400, code: "invalid_request" },
  {
    name: "wrong type",
    method: "POST",
    path: "/v1/memory",
    body: JSON.stringify({ ...ok, namespace: 5 }),
    status: 400,
    code: "invalid_request",
    field: "namespace",
  },
  {
    name: "missing content",
    method: "POST",
    path: "/v1/memory",
    body: JSON.stringify({ namespace: "n", entity: "e", infer: false }),
    status: 400,
    code: "invalid_request",
    field: "content",
  },
  {
    name: "blank content",
    method: "POST",
    path: "/v1/memory",
    body: JSON.stringify({ ...ok, content: "  \n " }),
    status: 400,
    code: "invalid_request",
    field: "content",
  },
  {
    name: "unknown field",
    method: "POST",
    path: "/v1/memory",
    body: JSON.stringify({ ...ok, colour: "red" }),
    status: 400,
    code: "invalid_request",
    field: "colour",
  },
  {
    name: "importance out of range",
    method: "POST",
    path: "/v1/memory",
    body: JSON.stringify({ ...ok, importance: 1.5 }),
    status: 400,
    code: "invalid_request",
    field: "importance",
  },
  {
    name: "ttl zero",
    method: "POST",
    path: "/v1/memory",
    body: JSON.stringify({ ...ok, ttl: 0 }),
    status: 400,
    code: "invalid_request",
    field: "ttl",
  },
  {
    name: "namespace too long",
    method: "POST",
    path: "/v1/memory",
    body: JSON.stringify({ ...ok, namespace: "x".repeat(129) }),
    status: 400,
    code: "invalid_request",
    field: "namespace",
  },
  {
    name: "control character in entity",
    method: "POST",
    path: "/v1/memory",
    body: JSON.stringify({ ...ok, entity: "a\u0000b" }),
    status: 400,
    code: "invalid_request",
    field: "entity",
  },
  {
    name: "33 tags",
    method: "POST",
    path: "/v1/memory",
    body: JSON.stringify({ ...ok, tags: Array.from({ length: 33 }, (_, i) => `t${i}`) }),
    status: 400,
    code: "invalid_request",
    field: "tags",
  },
  {
    name: "tag too long",
    method: "POST",
    path: "/v1/memory",
    body: JSON.stringify({ ...ok, tags: ["x".repeat(65)] }),
    status: 400,
    code: "invalid_request",
    field: "tags[0]",
  },
  {
    name: "metadata not an object",
    method: "POST",
    path: "/v1/memory",
    body: JSON.stringify({ ...ok, metadata: [1] }),
    status: 400,
    code: "invalid_request",
    field: "metadata",
  },
  {
    name: "metadata over 16 KiB",
    method: "POST",
    path: "/v1/memory",
    body: JSON.stringify({ ...ok, metadata: { big: "x".repeat(17000) } }),
    status: 400,
    code: "invalid_request",
    field: "metadata",
  },
  {
    name: "content over 64 KiB",
    method: "POST",
    path: "/v1/memory",
    body: JSON.stringify({ ...ok, content: "é".repeat(40000) }),
    status: 400,
    code: "invalid_request",
    field: "content",
  },
  {
    name: "body over 1 MiB",
    method: "POST",
    path: "/v1/memory",
    body: JSON.stringify({ ...ok, content: "x".repeat(1_100_000) }),
    status: 413,
    code: "payload_too_large",
  },
  {
    name: "not JSON content type",
    method: "POST",
    path: "/v1/memory",
    body: JSON.stringify(ok),
    headers: { "content-type": "text/plain" },
    status: 415,
    code: "unsupported_media_type",
  },
  {
    name: "no content type",
    method: "POST",
    path: "/v1/memory",
    body: JSON.stringify(ok),
    headers: {},
    status: 415,
    code: "unsupported_media_type",
  },
  { name: "JSON array body", method: "POST", path: "/v1/memory", body: "[]", status: 400, code: "invalid_request" },
  {
    name: "no key",
    method: "POST",
    path: "/v1/memory",
    body: JSON.stringify(ok),
    key: null,
    status: 401,
    code: "unauthorized",
  },
  {
    name: "malformed header",
    method: "POST",
    path: "/v1/memory",
    body: JSON.stringify(ok),
    headers: { ...json, authorization: `Basic ${rootSecret}` },
    key: null,
    status: 401,
    code: "unauthorized",
  },
  {
    name: "unknown key",
    method: "GET",
    path: "/v1/memory/events?namespace=n",
    key: "memd_nope",
    status: 401,
    code: "unauthorized",
  },
  {
    name: "no key beats a bad body",
    method: "POST",
    path: "/v1/memory",
    body: "{",
    key: null,
    status: 401,
    code: "unauthorized",
  },
  // U+0000 (only a \u escape carries it): PostgreSQL text cannot hold it, so no backend takes it.
  ...(
    [
      ["content", { ...ok, content: "a\u0000b" }],
      ["source", { ...ok, source: "s\u0000" }],
      ["tags[1]", { ...ok, tags: ["t", "\u0000"] }],
      ["metadata.k", { ...ok, metadata: { k: "v\u0000" } }],
    ] as const
  ).map(([field, body]) => ({
    name: `U+0000 in ${field}`,
    method: "POST",
    path: "/v1/memory",
    body: JSON.stringify(body),
    status: 400,
    code: "invalid_request",
    field,
  })),
  {
    name: "U+0000 in a search query",
    method: "POST",
    path: "/v1/memory/search",
    body: JSON.stringify({ namespace: "n", query: "tea\u0000" }),
    status: 400,
    code: "invalid_request",
    field: "query",
  },
  // One rule per field, whichever route takes it.
  ...(
    [
      ["a tag with a control character", "/v1/memory", { ...ok, tags: ["a\u0001"] }, "tags[0]"],
      [
        "a search category with U+0085",
        "/v1/memory/search",
        { namespace: "n", query: "q", category: "a\u0085b" },
        "category",
      ],
      [
        "a search tag with a control character",
        "/v1/memory/search",
        { namespace: "n", query: "q", tags: ["\u0007"] },
        "tags[0]",
      ],
    ] as const
  ).map(([name, path, body, field]) => ({
    name,
    method: "POST",
    path,
    body: JSON.stringify(body),
    status: 400,
    code: "invalid_request",
    field,
  })),
  // An empty body with the JSON media type: 400 on every route (the raw store's own route too).
  ...["/v1/memory", "/v1/memory/diff", "/v1/memory/search", "/v1/memory/erase", "/v1/keys"].map((path) => ({
    name: `an empty JSON body on ${path}`,
    method: "POST",
    path,
    body: "",
    headers: json,
    status: 400,
    code: "invalid_request",
  })),
  { name: "unknown route", method: "GET", path: "/v1/nothing", status: 404, code: "not_found" },
  {
    name: "unknown memory id",
    method: "GET",
    path: "/v1/memory/0190a0a0-0000-7000-8000-000000000000",
    status: 404,
    code: "not_found",
  },
  {
    name: "an id that is not a UUID does not exist",
    method: "GET",
    path: "/v1/memory/not-a-uuid",
    status: 404,
    code: "not_found",
  },
  {
    name: "DELETE of an id that is not a UUID",
    method: "DELETE",
    path: "/v1/memory/not-a-uuid",
    status: 404,
    code: "not_found",
  },
  {
    name: "events: unknown memoryId",
    method: "GET",
    path: "/v1/memory/events?namespace=n&memoryId=0190a0a0-0000-7000-8000-000000000000",
    status: 404,
    code: "not_found",
  },
  {
    name: "events: no namespace",
    method: "GET",
    path: "/v1/memory/events",
    status: 400,
    code: "invalid_request",
    field: "namespace",
  },
  {
    name: "events: limit 0",
    method: "GET",
    path: "/v1/memory/events?namespace=n&limit=0",
    status: 400,
    code: "invalid_request",
    field: "limit",
  },
  {
    name: "events: limit 1001",
    method: "GET",
    path: "/v1/memory/events?namespace=n&limit=1001",
    status: 400,
    code: "invalid_request",
    field: "limit",
  },
  {
    name: "events: limit abc",
    method: "GET",
    path: "/v1/memory/events?namespace=n&limit=abc",
    status: 400,
    code: "invalid_request",
    field: "limit",
  },
  {
    name: "events: unknown parameter",
    method: "GET",
    path: "/v1/memory/events?namespace=n&colour=1",
    status: 400,
    code: "invalid_request",
    field: "colour",
  },
  {
    name: "diff: missing namespace",
    method: "POST",
    path: "/v1/memory/diff",
    body: "{}",
    status: 400,
    code: "invalid_request",
    field: "namespace",
  },
  {
    name: "read key cannot store",
    method: "POST",
    path: "/v1/memory",
    body: JSON.stringify(ok),
    key: "READ",
    status: 403,
    code: "forbidden",
  },
];

describe("every error has its status, code and body shape", () => {
  for (const sc of scenarios)
    test(sc.name, async () => {
      const headers = sc.headers ?? (sc.body !== undefined ? json : {});
      const key = sc.key === "READ" ? readKey : sc.key;
      // An empty header set sends the body as bytes, so fetch adds no Content-Type of its own.
      const body =
        sc.headers && Object.keys(sc.headers).length === 0 && sc.body ? new TextEncoder().encode(sc.body) : sc.body;
      const res = await s.api(sc.method, sc.path, body, { key, headers });
      const text = await res.text();
      expect(res.status).toBe(sc.status);
      expect(res.headers.get("content-type")).toContain("application/json");
      expect(res.headers.get("x-request-id")).toBeTruthy();
      const parsed = JSON.parse(text);
      expect(Object.keys(parsed)).toEqual(["error"]);
      expect(parsed.error.code).toBe(sc.code);
      expect(typeof parsed.error.message).toBe("string");
      expect(text).not.toMatch(/at .*\.ts:\d+|node_modules|\/work\//);
      if (sc.field) expect(parsed.error.details.map((d: { field: string }) => d.field)).toContain(sc.field);
    });

  test("a read key may diff and read events", async () => {
    expect((await s.api("POST", "/v1/memory/diff", { namespace: "n" }, { key: readKey })).status).toBe(200);
    expect((await s.api("GET", "/v1/memory/events?namespace=n", undefined, { key: readKey })).status).toBe(200);
  });

  test("nothing was written by any failed request", async () => {
    const ev = await s.json("GET", "/v1/memory/events?namespace=n");
    expect(ev.body).toEqual([]);
  });
});

describe("request log", () => {
  test("one line per request with method, path, status, ms; never content or keys", async () => {
    await s.settleLogs();
    const before = s.logs.length;
    await s.api(
      "POST",
      "/v1/memory",
      { ...ok, namespace: "logged", content: "secret-content-xyz" },
      { headers: { "x-request-id": "req-123", ...json } },
    );
    await s.settleLogs();
    const lines = s.logs.slice(before).map((l) => JSON.parse(l));
    const line = lines.find((l) => l.requestId === "req-123");
    expect(line).toMatchObject({ msg: "request", method: "POST", path: "/v1/memory", status: 200, keyId: "root" });
    expect(typeof line.ms).toBe("number");
    const all = s.logs.join("\n");
    expect(all).not.toContain("secret-content-xyz");
    expect(all).not.toContain(rootSecret);
    expect(all).not.toContain(readKey);
  });
});
