// @targets lmdb postgres binary
// The API reference page at /docs loads nothing from outside: every script it names is served by memd.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { startTestServer, type TestServer } from "../helpers";

let s: TestServer;
beforeAll(async () => (s = await startTestServer()));
afterAll(() => s.stop());

test("/docs references no outside address and its script is served by memd", async () => {
  const page = await (await fetch(`${s.url}/docs`)).text();
  expect(page).not.toMatch(/(https?:)?\/\/[a-z0-9.-]+\.[a-z]{2,}/i);
  const srcs = [...page.matchAll(/src="([^"]+)"/g)].map((m) => m[1]);
  expect(srcs.length).toBeGreaterThan(0);
  for (const src of srcs) {
    expect(src.startsWith("/")).toBe(true);
    const r = await fetch(s.url + src);
    expect(r.status).toBe(200);
    expect(r.headers.get("content-type")).toContain("javascript");
    expect((await r.text()).length).toBeGreaterThan(100_000);
  }
});
