// @targets lmdb postgres binary
// The Authorization scheme in any case; a scoped admin key cannot make a key that outlives it, and
// /metrics needs a key scoped to *.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { rootSecret, startTestServer, type TestServer } from "../helpers";

let s: TestServer;
beforeAll(async () => (s = await startTestServer()));
afterAll(() => s.stop());

test.each(["bearer", "BEARER", "Bearer", "bEaReR"])("Authorization: %s <key> works", async (scheme) => {
  const r = await fetch(`${s.url}/v1/keys`, { headers: { authorization: `${scheme} ${rootSecret}` } });
  expect(r.status).toBe(200);
});

test("a scoped admin key cannot create a key that outlives it; /metrics needs a key scoped to *", async () => {
  const hour = 3600_000;
  const made = await s.json("POST", "/v1/keys", {
    name: "team admin",
    permission: "admin",
    namespaces: ["team/*"],
    expiresAt: new Date(Date.now() + hour).toISOString(),
  });
  expect(made.status).toBe(201);
  const key = made.body.secret;
  const create = (expiresAt?: string) =>
    s.json("POST", "/v1/keys", { name: "k", permission: "read", namespaces: ["team/a"], expiresAt }, { key });
  expect((await create()).status).toBe(403);
  expect((await create(new Date(Date.now() + 2 * hour).toISOString())).status).toBe(403);
  expect((await create(new Date(Date.now() + hour / 2).toISOString())).status).toBe(201);
  expect((await s.json("GET", "/metrics", undefined, { key })).status).toBe(403);
  expect((await s.api("GET", "/metrics")).status).toBe(200);
});
