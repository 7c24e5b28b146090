// @targets lmdb binary
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { startTestServer, type TestServer } from "../helpers";

let s: TestServer;
beforeAll(async () => (s = await startTestServer()));
afterAll(() => s.stop());

const store = (content: string) =>
  s.json("POST", "/v1/memory", { namespace: "ops", entity: "e", content, infer: false });

describe("no key needed", () => {
  test.each([
    ["/healthz", 200, '"ok"'],
    ["/health", 200, '"ok"'],
    ["/readyz", 200, '"ready"'],
    ["/v1/openapi.json", 200, '"openapi"'],
    ["/docs", 200, "<html"],
  ])("GET %s answers %d", async (path, status, fragment) => {
    const res = await s.api("GET", path, undefined, { key: null });
    expect(res.status).toBe(status);
    expect(await res.text()).toContain(fragment);
  });
});

test("/metrics needs an admin key by default", async () => {
  expect((await s.api("GET", "/metrics", undefined, { key: null })).status).toBe(401);
  expect((await s.api("GET", "/metrics", undefined, { key: "wrong" })).status).toBe(401);
});

test("/metrics counts requests by route template and status, with store and model figures", async () => {
  const a = await store("metrics one");
  await store("metrics two");
  await s.json("GET", `/v1/memory/${a.body.memories[0].id}`);
  await s.json("GET", "/v1/memory/00000000-0000-7000-8000-000000000000");
  const res = await s.api("GET", "/metrics");
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toContain("text/plain");
  const text = await res.text();
  expect(text).toMatch(/memd_http_requests_total\{method="POST",route="\/v1\/memory",status="200"\} [2-9]/);
  expect(text).toContain('memd_http_requests_total{method="GET",route="/v1/memory/:id",status="200"} 1');
  expect(text).toContain('memd_http_requests_total{method="GET",route="/v1/memory/:id",status="404"} 1');
  expect(text).not.toContain(a.body.memories[0].id);
  expect(text).toMatch(
    /memd_http_request_duration_seconds_bucket\{method="POST",route="\/v1\/memory",le="\+Inf"\} [2-9]/,
  );
  expect(text).toMatch(/memd_http_request_duration_seconds_count\{method="POST",route="\/v1\/memory"\} [2-9]/);
  for (const name of [
    "memd_lmdb_map_size_bytes",
    "memd_lmdb_used_bytes",
    "memd_memories",
    "memd_events",
    "memd_model_calls_total",
  ])
    expect(text).toMatch(new RegExp(`^${name} \\d`, "m"));
  expect(Number(/^memd_events (\d+)/m.exec(text)![1])).toBeGreaterThanOrEqual(2);
  expect(Number(/^memd_lmdb_used_bytes (\d+)/m.exec(text)![1])).toBeGreaterThan(0);
});

test("MEMD_METRICS_PUBLIC=true serves /metrics without a key", async () => {
  const p = await startTestServer({ env: { MEMD_METRICS_PUBLIC: "true" } });
  try {
    const res = await p.api("GET", "/metrics", undefined, { key: null });
    expect(res.status).toBe(200);
    expect(await res.text()).toContain("memd_lmdb_map_size_bytes");
  } finally {
    await p.stop();
  }
});

test("the OpenAPI document comes from the route schemas", async () => {
  const { body: doc } = await s.json("GET", "/v1/openapi.json", undefined, { key: null });
  expect(doc.openapi).toMatch(/^3\./);
  const storeBody = doc.paths["/v1/memory"].post.requestBody.content["application/json"].schema;
  expect(storeBody.required).toEqual(["namespace", "entity", "content"]);
  expect(storeBody.properties.namespace.maxLength).toBe(128);
  expect(storeBody.additionalProperties).toBe(false);
  expect(doc.paths["/v1/memory/diff"].post.requestBody.content["application/json"].schema.required).toContain(
    "namespace",
  );
  expect(doc.paths["/v1/memory/events"].get.parameters.map((p: { name: string }) => p.name)).toContain("memoryId");
  expect(doc.paths["/v1/memory/{id}"]).toBeDefined();
});

test("/docs groups every operation by tag, with short labels; the mem0-compatible routes have a group of their own", async () => {
  const { body: doc } = await s.json("GET", "/v1/openapi.json", undefined, { key: null });
  const groups = (doc.tags as { name: string; description: string }[]).map((t) => t.name);
  expect(groups.slice(0, 7)).toEqual(["memory", "search", "audit", "browse", "erasure", "keys", "ops"]);
  expect(groups).toContain("mem0");
  const ops: { method: string; path: string; tags: string[]; summary: string }[] = [];
  for (const [path, methods] of Object.entries(doc.paths as Record<string, Record<string, any>>))
    for (const [method, op] of Object.entries(methods)) ops.push({ method, path, tags: op.tags, summary: op.summary });
  for (const op of ops) {
    expect({ ...op, tags: op.tags?.length }).toEqual({ ...op, tags: 1 });
    expect(groups).toContain(op.tags[0]);
    // A label, not a sentence: the sidebar shows it whole.
    expect({ ...op, long: op.summary.length > 40 }).toEqual({ ...op, long: false });
  }
  const group = (method: string, path: string) => ops.find((o) => o.method === method && o.path === path)?.tags[0];
  expect(group("post", "/v1/memory")).toBe("memory");
  expect(group("post", "/v1/memory/search")).toBe("search");
  expect(group("post", "/v1/keys")).toBe("keys");
  expect(group("get", "/healthz")).toBe("ops");
  for (const path of ["/v3/memories/add/", "/v1/memories/", "/v3/memories/search/", "/v1/ping/"])
    expect([path, ops.filter((o) => o.path === path).every((o) => o.tags[0] === "mem0")]).toEqual([path, true]);
  // The sentence the label replaced is kept, as the start of the description.
  expect(doc.paths["/v1/memory/{id}"].patch.description).toStartWith("Edit a memory in place");
});

test("start-up and request log lines are JSON with version, data dir and address", async () => {
  await s.settleLogs();
  const lines = s.logs.filter((l) => l.startsWith("{")).map((l) => JSON.parse(l));
  const start = lines.find((l) => l.msg === "memd started");
  expect(start).toMatchObject({ level: "info", dataDir: s.dataDir, address: s.url });
  expect(start.version).toBeString();
  const req = lines.find((l) => l.msg === "request" && l.path === "/v1/memory");
  expect(req).toMatchObject({ method: "POST", status: 200 });
  expect(JSON.stringify(lines)).not.toContain("metrics one");
});
