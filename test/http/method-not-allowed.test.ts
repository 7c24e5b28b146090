// @targets lmdb postgres binary
// A known path with another method: 405 method_not_allowed with Allow; an unknown path: 404.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { startTestServer, type TestServer } from "../helpers";

let s: TestServer;
beforeAll(async () => (s = await startTestServer()));
afterAll(() => s.stop());

test.each([
  ["GET", "/v1/memory/diff", "POST"],
  ["POST", "/v1/memory/events", "GET"],
  ["PUT", "/v1/memory", "DELETE, GET, POST"],
  ["PUT", "/v1/memory/0190a4c6-8e6f-7b1c-9a2d-3f4e5d6c7b8a", "DELETE, GET, PATCH"],
  ["PATCH", "/v1/keys", "GET, POST"],
  ["POST", "/healthz", "GET"],
])("%s %s: 405 method_not_allowed, Allow: %s", async (method, path, allow) => {
  const r = await s.api(method, path);
  expect(r.status).toBe(405);
  expect(r.headers.get("allow")).toBe(allow);
  expect(((await r.json()) as { error: { code: string } }).error.code).toBe("method_not_allowed");
});

test("an unknown path is still 404", async () => {
  expect((await s.json("GET", "/v1/nothing")).status).toBe(404);
});
