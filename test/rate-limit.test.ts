import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Elysia } from "elysia";
import { loadConfig, parseRateLimit } from "../src/config/config";
import { errorHandler } from "../src/http/error-handler";
import { rateLimit } from "../src/http/rate-limit";
import { createLogger } from "../src/log";
import { startTestServer, type TestServer } from "./helpers";

describe("the middleware, in process with a fake clock", () => {
  let now = 0;
  const app = new Elysia()
    .use(errorHandler(createLogger("error", () => {})))
    .use(rateLimit({ rps: 2, burst: 3, now: () => now, bucketOf: (r) => r.headers.get("x-bucket") ?? undefined }))
    .get("/", () => "ok");
  const hit = (bucket?: string) =>
    app.handle(new Request("http://localhost/", { headers: bucket ? { "x-bucket": bucket } : {} }));

  test("burst, then 429 with Retry-After and the error body; refills at rps; buckets are separate", async () => {
    for (let i = 0; i < 3; i++) expect((await hit("a")).status).toBe(200);
    const over = await hit("a");
    expect(over.status).toBe(429);
    expect(over.headers.get("retry-after")).toBe("1");
    expect(await over.json()).toEqual({ error: { code: "rate_limited", message: expect.any(String) } });
    expect((await hit("b")).status).toBe(200);
    now += 499;
    expect((await hit("a")).status).toBe(429);
    now += 2;
    expect((await hit("a")).status).toBe(200);
    expect((await hit("a")).status).toBe(429);
    now += 60_000; // a full bucket holds at most `burst`
    for (let i = 0; i < 3; i++) expect((await hit("a")).status).toBe(200);
    expect((await hit("a")).status).toBe(429);
  });

  test("requests with no bucket are not limited", async () => {
    for (let i = 0; i < 20; i++) expect((await hit()).status).toBe(200);
  });

  test("Retry-After is whole seconds, at least 1, long enough for a slow rate", async () => {
    const t = 0;
    const slow = new Elysia()
      .use(errorHandler(createLogger("error", () => {})))
      .use(rateLimit({ rps: 0.1, now: () => t, bucketOf: () => "k" }))
      .get("/", () => "ok");
    expect((await slow.handle(new Request("http://localhost/"))).status).toBe(200);
    const r = await slow.handle(new Request("http://localhost/"));
    expect(r.status).toBe(429);
    expect(r.headers.get("retry-after")).toBe("10");
  });
});

describe("MEMD_RATE_LIMIT / --rate-limit", () => {
  test.each([
    ["50", { rps: 50, burst: 50 }],
    ["50:100", { rps: 50, burst: 100 }],
    ["0.5", { rps: 0.5, burst: 1 }],
    ["2.5:1", { rps: 2.5, burst: 1 }],
  ])("%p parses", (raw, want) => expect(parseRateLimit(raw)).toEqual(want));
  test.each(["0", "-1", "abc", "5:0", "5:2.5", "5:", ":5", "1e3", "5:5:5"])("%p is refused", (raw) =>
    expect(() => loadConfig(["--rate-limit", raw], {})).toThrow("--rate-limit"),
  );
  test("unset: no limit", () => expect(loadConfig([], {}).rateLimit).toBeUndefined());
});

describe("over HTTP, per key", () => {
  let s: TestServer;
  beforeAll(async () => (s = await startTestServer({ env: { MEMD_RATE_LIMIT: "5:3" } })));
  afterAll(() => s.stop());

  test("429 rate_limited with Retry-After once the burst is spent, then served again after waiting", async () => {
    const other = (await s.json("POST", "/v1/keys", { name: "other", permission: "read", namespaces: ["*"] })).body
      .secret;
    // The POST above took one of root's 3 tokens.
    for (let i = 0; i < 2; i++) expect((await s.json("GET", "/v1/memory?namespace=a")).status).toBe(200);
    const over = await s.json("GET", "/v1/memory?namespace=a");
    expect(over.status).toBe(429);
    expect(over.body).toEqual({ error: { code: "rate_limited", message: expect.any(String) } });
    expect(Number(over.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    expect(over.headers.get("x-request-id")).toBeString();
    // Another key has its own bucket; requests without a key are answered 401, not limited.
    expect((await s.json("GET", "/v1/memory?namespace=a", undefined, { key: other })).status).toBe(200);
    expect((await s.json("GET", "/v1/memory?namespace=a", undefined, { key: null })).status).toBe(401);
    expect((await s.json("GET", "/healthz", undefined, { key: null })).status).toBe(200);
    await Bun.sleep(1000 * Number(over.headers.get("retry-after")));
    expect((await s.json("GET", "/v1/memory?namespace=a")).status).toBe(200);
    await s.settleLogs();
    expect(s.logs.some((l) => l.includes('"status":429'))).toBe(true);
  });
});
