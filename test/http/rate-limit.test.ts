// @targets lmdb binary
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { loadConfig, parseRateLimit } from "../../src/config/config";
import { tokenBuckets } from "../../src/http/rate-limit";
import { ApiError } from "../../src/wire/errors";
import { startTestServer, type TestServer } from "../helpers";

describe("the token buckets, with a fake clock", () => {
  let now = 0;
  const take = tokenBuckets({ rps: 2, burst: 3, now: () => now });
  /** 200 when a token was taken, else the 429's status and Retry-After. */
  const hit = (bucket: string) => {
    try {
      take(bucket);
      return 200;
    } catch (e) {
      if (!(e instanceof ApiError)) throw e;
      expect(e.code).toBe("rate_limited");
      return `${e.status} retry ${e.headers?.["retry-after"]}`;
    }
  };

  test("burst, then 429 with Retry-After; refills at rps; buckets are separate", () => {
    for (let i = 0; i < 3; i++) expect(hit("a")).toBe(200);
    expect(hit("a")).toBe("429 retry 1");
    expect(hit("b")).toBe(200);
    now += 499;
    expect(hit("a")).toBe("429 retry 1");
    now += 2;
    expect(hit("a")).toBe(200);
    expect(hit("a")).toBe("429 retry 1");
    now += 60_000; // a full bucket holds at most `burst`
    for (let i = 0; i < 3; i++) expect(hit("a")).toBe(200);
    expect(hit("a")).toBe("429 retry 1");
  });

  test("Retry-After is whole seconds, at least 1, long enough for a slow rate", () => {
    const slow = tokenBuckets({ rps: 0.1, now: () => 0 });
    slow("k");
    expect(() => slow("k")).toThrow(expect.objectContaining({ status: 429, headers: { "retry-after": "10" } }));
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
  // A token every 2 s: the four requests that spend the burst never span a refill, however slow
  // the machine (at 5 a second one CI run under load got a fresh token before the fourth).
  beforeAll(async () => (s = await startTestServer({ env: { MEMD_RATE_LIMIT: "0.5:3" } })));
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
