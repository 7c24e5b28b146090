// @targets lmdb postgres binary
// Validation answers a client can act on: one detail per bad field, in words (never a pattern or
// the validator's wording), and dates checked as dates (no Feb 30, no hour 24; a leap day is fine).
import { afterAll, beforeAll, expect, test } from "bun:test";
import { startTestServer, type TestServer } from "../helpers";

let s: TestServer;
beforeAll(async () => (s = await startTestServer()));
afterAll(() => s.stop());
const store = { namespace: "op", entity: "e", content: "fact", infer: false };

test.each([
  ["diff since", "POST", "/v1/memory/diff", { namespace: "op", since: "2026-02-30" }, "since"],
  ["diff since, hour 24", "POST", "/v1/memory/diff", { namespace: "op", since: "2026-01-31T24:00:00Z" }, "since"],
  [
    "key expiresAt",
    "POST",
    "/v1/keys",
    { name: "k", permission: "read", namespaces: ["*"], expiresAt: "2099-02-30T00:00:00Z" },
    "expiresAt",
  ],
  [
    "key expiresAt, not a date",
    "POST",
    "/v1/keys",
    { name: "k", permission: "read", namespaces: ["*"], expiresAt: "soon" },
    "expiresAt",
  ],
  // Not a string at all: the same words.
  [
    "key expiresAt, a number",
    "POST",
    "/v1/keys",
    { name: "k", permission: "read", namespaces: ["*"], expiresAt: 5 },
    "expiresAt",
  ],
  ["diff since, a number", "POST", "/v1/memory/diff", { namespace: "op", since: 5 }, "since"],
])("an impossible date (%s) is refused", async (_, method, path, body, field) => {
  const r = await s.json(method, path, body);
  expect(r.status).toBe(400);
  expect(r.body.error.details).toEqual([{ field, message: expect.stringContaining("ISO 8601") }]);
});

test("several bad fields, some checked beyond the schema's types: each one named at once", async () => {
  const diff = await s.json("POST", "/v1/memory/diff", { limit: 0, since: "x" });
  expect(diff.status).toBe(400);
  expect(diff.body.error.details).toEqual([
    { field: "namespace", message: "is required" },
    { field: "since", message: "must be an ISO 8601 timestamp" },
    { field: "limit", message: expect.stringContaining("from 1 to 1000") },
  ]);
  const events = await s.json("GET", "/v1/memory/events?limit=0&namespace=");
  expect(events.status).toBe(400);
  expect(events.body.error.details.map((d: { field: string }) => d.field).sort()).toEqual(["limit", "namespace"]);
});

test("a leap day is a date", async () => {
  expect((await s.json("POST", "/v1/memory/diff", { namespace: "op", since: "2024-02-29" })).status).toBe(200);
});

test.each([
  [
    "missing fields",
    { infer: false },
    [
      { field: "namespace", message: "is required" },
      { field: "entity", message: "is required" },
      { field: "content", message: "is required" },
    ],
  ],
  [
    "a name with a control character",
    { ...store, namespace: "a\u0007" },
    [{ field: "namespace", message: "must be a string of 1 to 128 characters without control characters" }],
  ],
  [
    "a wrong type",
    { ...store, importance: "high" },
    [{ field: "importance", message: "must be a number from 0 to 1" }],
  ],
  [
    "tags, several bad",
    { ...store, tags: ["", 5, "x".repeat(65)] },
    [
      { field: "tags[0]", message: "must be a string of 1 to 64 characters, not blank, without control characters" },
      { field: "tags[1]", message: "must be a string of 1 to 64 characters, not blank, without control characters" },
      { field: "tags[2]", message: "must be a string of 1 to 64 characters, not blank, without control characters" },
    ],
  ],
  ["an unknown field", { ...store, colour: "red" }, [{ field: "colour", message: "is not a known field" }]],
])("validation in words, one detail per field: %s", async (_, body, details) => {
  const r = await s.json("POST", "/v1/memory", body);
  expect(r.status).toBe(400);
  expect(r.body.error.details).toEqual(details);
});

test("no validation message shows a pattern or the validator's wording", async () => {
  const bodies: [string, string, unknown][] = [
    ["POST", "/v1/memory", { namespace: "\u0000", entity: 1, content: " ", ttl: -1, tags: "x", infer: "no" }],
    ["POST", "/v1/memory/diff", { namespace: "op", limit: 0.5 }],
    ["GET", "/v1/memory/events?namespace=op&limit=abc", undefined],
    ["GET", "/v1/memory/events?memoryId=nope", undefined],
    ["POST", "/v1/keys", { name: "", permission: "root", namespaces: [] }],
  ];
  for (const [method, path, body] of bodies) {
    const r = await s.json(method, path, body);
    expect(r.status).toBe(400);
    const text = JSON.stringify(r.body);
    expect(text).not.toMatch(/Expected|pattern|\\\\u|\^|\$"|union|match/i);
  }
  const limit = await s.json("POST", "/v1/memory/diff", { namespace: "op", limit: 0 });
  expect(limit.body.error.details).toEqual([{ field: "limit", message: "must be a whole number from 1 to 1000" }]);
});
