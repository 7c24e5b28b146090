// @targets lmdb postgres binary
/**
 * Routes that name a memory by id (memd's GET/PATCH/DELETE /v1/memory/:id, the events of one
 * memory, mem0's /v1/memories/{id}/ and its history) take their namespace from that memory, and
 * one place checks the key's scope (keys/auth.ts, the `memory` macro): a memory of a namespace
 * the key does not cover answers 404 not_found, never 403, and exactly as an id that names no
 * memory, so that ids of other namespaces cannot be probed. The key's own memories answer 200.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { startTestServer, type TestServer } from "../helpers";

let s: TestServer;
let keyA: string;
const unknownId = "01900000-0000-7000-8000-000000000000";

async function seed(namespace: string, content = "likes tea"): Promise<string> {
  const r = await s.json("POST", "/v1/memory", { namespace, entity: "u1", content, infer: false });
  expect(r.status).toBe(200);
  return r.body.memories[0].id;
}

/** The answer to a call with key A: status and body. */
async function asA(method: string, path: string, body?: unknown) {
  const res = await s.api(method, path, body, { key: keyA });
  return { status: res.status, body: (await res.json()) as any };
}

beforeAll(async () => {
  s = await startTestServer();
  const r = await s.json("POST", "/v1/keys", { name: "scoped to A", permission: "read_write", namespaces: ["ns-a"] });
  expect(r.status).toBe(201);
  keyA = r.body.secret;
});

afterAll(() => s?.stop());

describe("a memory of another namespace is 404, as an unknown id", () => {
  // Each call, as it is made for an id; bodies are valid so only the id decides the answer.
  const calls: [string, string, (id: string) => string, unknown?][] = [
    ["GET /v1/memory/:id", "GET", (id) => `/v1/memory/${id}`],
    ["GET /v1/memory/:id?asOf", "GET", (id) => `/v1/memory/${id}?asOf=${encodeURIComponent(new Date().toISOString())}`],
    ["PATCH /v1/memory/:id", "PATCH", (id) => `/v1/memory/${id}`, { content: "changed by A" }],
    ["DELETE /v1/memory/:id", "DELETE", (id) => `/v1/memory/${id}`],
    ["GET /v1/memory/events?memoryId", "GET", (id) => `/v1/memory/events?memoryId=${id}`],
    ["mem0 GET /v1/memories/{id}/", "GET", (id) => `/v1/memories/${id}/`],
    ["mem0 PUT /v1/memories/{id}/", "PUT", (id) => `/v1/memories/${id}/`, { text: "changed by A" }],
    ["mem0 DELETE /v1/memories/{id}/", "DELETE", (id) => `/v1/memories/${id}/`],
    ["mem0 GET /v1/memories/{id}/history/", "GET", (id) => `/v1/memories/${id}/history/`],
  ];
  for (const [name, method, path, body] of calls)
    test(name, async () => {
      const foreign = await seed("ns-b", `b's memory for ${name}`);
      const got = await asA(method, path(foreign), body);
      expect(got.status).toBe(404);
      const unknown = await asA(method, path(unknownId), body);
      expect(unknown.status).toBe(404);
      expect(got.body).toEqual(unknown.body);
      expect(got.body.error?.code ?? got.body.code).toBe("not_found");
      // Untouched: the root key still sees it as it was.
      const still = await s.json("GET", `/v1/memory/${foreign}`);
      expect(still.status).toBe(200);
      expect(still.body.content).toBe(`b's memory for ${name}`);
    });

  test("a PATCH that changes nothing: the same 400 for a foreign id as for an unknown one", async () => {
    const foreign = await seed("ns-b");
    const got = await asA("PATCH", `/v1/memory/${foreign}`, {});
    const unknown = await asA("PATCH", `/v1/memory/${unknownId}`, {});
    expect(got.status).toBe(400);
    expect(got.body).toEqual(unknown.body);
  });

  test("events by memoryId of a foreign memory, naming the key's own namespace: 404", async () => {
    const foreign = await seed("ns-b");
    const got = await asA("GET", `/v1/memory/events?namespace=ns-a&memoryId=${foreign}`);
    expect(got.status).toBe(404);
    expect(got.body.error.code).toBe("not_found");
  });
});

describe("the key's own memories answer 200", () => {
  test("memd: GET, PATCH, events, DELETE", async () => {
    const id = await seed("ns-a");
    const got = await asA("GET", `/v1/memory/${id}`);
    expect(got.status).toBe(200);
    expect(got.body.id).toBe(id);
    const patched = await asA("PATCH", `/v1/memory/${id}`, { content: "likes green tea" });
    expect(patched.status).toBe(200);
    expect(patched.body.content).toBe("likes green tea");
    const events = await asA("GET", `/v1/memory/events?memoryId=${id}`);
    expect(events.status).toBe(200);
    expect(events.body.map((e: { event: string }) => e.event)).toEqual(["UPDATE", "ADD"]);
    const deleted = await asA("DELETE", `/v1/memory/${id}`);
    expect(deleted.status).toBe(200);
    expect(deleted.body).toEqual({ deleted: true });
    // Deleted: 404 now, as for any id that names no current memory.
    expect((await asA("GET", `/v1/memory/${id}`)).status).toBe(404);
  });

  test("mem0: GET, PUT, history, DELETE", async () => {
    const id = await seed("ns-a");
    const got = await asA("GET", `/v1/memories/${id}/`);
    expect(got.status).toBe(200);
    expect(got.body.id).toBe(id);
    const put = await asA("PUT", `/v1/memories/${id}/`, { text: "likes black tea" });
    expect(put.status).toBe(200);
    expect(put.body.memory).toBe("likes black tea");
    const history = await asA("GET", `/v1/memories/${id}/history/`);
    expect(history.status).toBe(200);
    expect(history.body.map((e: { event: string }) => e.event)).toEqual(["ADD", "UPDATE"]);
    const deleted = await asA("DELETE", `/v1/memories/${id}/`);
    expect(deleted.status).toBe(200);
    // History works for deleted memories too.
    expect((await asA("GET", `/v1/memories/${id}/history/`)).status).toBe(200);
    expect((await asA("GET", `/v1/memories/${id}/`)).status).toBe(404);
  });
});
