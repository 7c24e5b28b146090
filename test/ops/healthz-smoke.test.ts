// @targets lmdb postgres binary
import { afterAll, beforeAll, expect, test } from "bun:test";
import { startTestServer, type TestServer } from "../helpers";

let s: TestServer;
beforeAll(async () => (s = await startTestServer()));
afterAll(() => s.stop());

test("healthz answers without a key", async () => {
  const r = await s.json("GET", "/healthz", undefined, { key: null });
  expect(r.status).toBe(200);
});
