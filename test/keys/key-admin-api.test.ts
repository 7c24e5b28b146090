// @targets lmdb postgres pgbouncer binary
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import type { KeyRecord } from "../../src/keys/model";
import { covers, coversPattern, patternProblem } from "../../src/keys/service";
import { rootSecret, startTestServer, type TestServer } from "../helpers";

let s: TestServer;
beforeAll(async () => (s = await startTestServer()));
afterAll(() => s.stop());

const keyWith = (namespaces: string[]) => ({ namespaces }) as KeyRecord;
const newKey = (body: Record<string, unknown>, key?: string) =>
  s.json("POST", "/v1/keys", { name: "agent", permission: "read_write", namespaces: ["own"], ...body }, { key });

describe("namespace patterns", () => {
  test.each([
    ["team-a/*", "team-a/x", true],
    ["team-a/*", "team-a/x/y", true],
    ["team-a/*", "team-a", false],
    ["team-a/*", "team-ab", false],
    ["team-a/*", "team-ab/x", false],
    ["team-a", "team-a", true],
    ["team-a", "team-a/x", false],
    ["*", "anything", true],
  ])("%p covers %p: %p", (pattern, ns, want) => expect(covers(keyWith([pattern]), ns)).toBe(want));

  test.each([
    [["*"], "*", true],
    [["team-a/*"], "*", false],
    [["team-a/*"], "team-a/x/*", true],
    [["team-a/*"], "team-a/*", true],
    [["team-a/*"], "team-a", false],
    [["team-a/x/"], "team-a/x/*", false],
    [["own"], "own", true],
  ])("key %p may hand out %p: %p", (mine, pattern, want) => expect(coversPattern(keyWith(mine), pattern)).toBe(want));

  test.each(["*", "own", "team-a/*", "a.b-c_d/e"])("%p is valid", (p) => expect(patternProblem(p)).toBeUndefined());
  test.each(["a*", "*/*", "/*", "team-a/**", "te*am/*", "a\u0000b", "x".repeat(129)])("%p is invalid", (p) =>
    expect(patternProblem(p)).toBeString(),
  );
});

describe("admin API", () => {
  test("create answers 201 with the secret once; list and get never show secrets or hashes", async () => {
    const r = await newKey({ name: "agent-1", namespaces: ["own", "team-a/*"] });
    expect(r.status).toBe(201);
    expect(r.body).toMatchObject({
      name: "agent-1",
      permission: "read_write",
      namespaces: ["own", "team-a/*"],
      expiresAt: null,
      lastUsedAt: null,
    });
    expect(r.body.secret).toMatch(/^memd_[\w-]{20,}$/);
    expect(r.body.id).toMatch(/^key_/);
    const hash = createHash("sha256").update(r.body.secret).digest("hex");
    for (const path of ["/v1/keys", `/v1/keys/${r.body.id}`]) {
      const text = await (await s.api("GET", path)).text();
      expect(text).toContain(r.body.id);
      expect(text).not.toContain(r.body.secret);
      expect(text).not.toContain(hash);
      expect(text).not.toMatch(/"(secret|hash)"/);
    }
  });

  test("a new key works at once, and records lastUsedAt", async () => {
    const { body } = await newKey({});
    expect((await s.json("GET", "/v1/memory?namespace=own", undefined, { key: body.secret })).status).toBe(200);
    await Bun.sleep(50);
    const k = await s.json("GET", `/v1/keys/${body.id}`);
    expect(k.body.lastUsedAt).toBeString();
  });

  test("revocation takes effect on the next request; a second revoke is 404", async () => {
    const { body } = await newKey({});
    expect((await s.json("GET", "/v1/memory?namespace=own", undefined, { key: body.secret })).status).toBe(200);
    expect(await s.json("DELETE", `/v1/keys/${body.id}`)).toMatchObject({
      status: 200,
      body: { id: body.id, revoked: true },
    });
    const after = await s.json("GET", "/v1/memory?namespace=own", undefined, { key: body.secret });
    expect(after).toMatchObject({ status: 401, body: { error: { code: "unauthorized" } } });
    expect((await s.json("DELETE", `/v1/keys/${body.id}`)).status).toBe(404);
    expect((await s.json("GET", `/v1/keys/${body.id}`)).status).toBe(404);
    expect((await s.json("GET", "/v1/keys")).body.some((k: { id: string }) => k.id === body.id)).toBe(false);
  });

  test("an expiry in the future works until it passes, then 401", async () => {
    const { body, status } = await newKey({ expiresAt: new Date(Date.now() + 300).toISOString() });
    expect(status).toBe(201);
    expect((await s.json("GET", "/v1/memory?namespace=own", undefined, { key: body.secret })).status).toBe(200);
    await Bun.sleep(350);
    const r = await s.json("GET", "/v1/memory?namespace=own", undefined, { key: body.secret });
    expect(r).toMatchObject({
      status: 401,
      body: { error: { code: "unauthorized", message: "the API key has expired" } },
    });
  });

  test("the root key from MEMD_API_KEY is not a stored key: 404, not revocable", async () => {
    expect((await s.json("DELETE", "/v1/keys/root")).status).toBe(404);
    expect((await s.json("GET", "/v1/memory?namespace=own")).status).toBe(200);
  });

  test.each([
    ["expiresAt in the past", { expiresAt: "2001-01-01T00:00:00Z" }, "expiresAt"],
    ["expiresAt not a date", { expiresAt: "tomorrow" }, "expiresAt"],
    ["pattern with a * inside", { namespaces: ["te*am"] }, "namespaces[0]"],
    ["pattern */*", { namespaces: ["own", "*/*"] }, "namespaces[1]"],
    ["empty pattern", { namespaces: [""] }, "namespaces[0]"],
    ["no namespaces", { namespaces: [] }, "namespaces"],
    ["control character", { namespaces: ["a\u0001"] }, "namespaces[0]"],
    ["unknown permission", { permission: "root" }, "permission"],
    ["blank name", { name: "  " }, "name"],
    ["unknown field", { secret: "memd_mine" }, "secret"],
  ])("%s: 400 invalid_request naming the field", async (_, body, field) => {
    const r = await newKey(body);
    expect(r.status).toBe(400);
    expect(r.body.error.code).toBe("invalid_request");
    expect(JSON.stringify(r.body.error)).toContain(field.replace(/\[\d+\]$/, ""));
  });

  test("GET and DELETE of an unknown or absurd id: 404 or 400, never 500", async () => {
    expect((await s.json("GET", "/v1/keys/key_0000")).status).toBe(404);
    expect((await s.json("DELETE", "/v1/keys/key_0000")).status).toBe(404);
    expect((await s.json("GET", `/v1/keys/${"x".repeat(65)}`)).status).toBe(400);
  });

  test("an admin key limited to team-a/* manages only keys within team-a/*", async () => {
    const admin = (await newKey({ permission: "admin", namespaces: ["team-a/*"] })).body;
    const other = (await newKey({ namespaces: ["team-b/*"] })).body;
    expect((await newKey({ namespaces: ["*"] }, admin.secret)).status).toBe(403);
    expect((await newKey({ namespaces: ["team-a"] }, admin.secret)).status).toBe(403);
    const inside = await newKey({ namespaces: ["team-a/x/*", "team-a/y"] }, admin.secret);
    expect(inside.status).toBe(201);
    const listed = (await s.json("GET", "/v1/keys", undefined, { key: admin.secret })).body.map(
      (k: { id: string }) => k.id,
    );
    expect(listed).toContain(inside.body.id);
    expect(listed).not.toContain(other.id);
    expect((await s.json("DELETE", `/v1/keys/${other.id}`, undefined, { key: admin.secret })).status).toBe(404);
    expect((await s.json("GET", `/v1/keys/${other.id}`)).status).toBe(200);
  });
});

describe("secrets stay secret", () => {
  test("keys never appear in logs, error bodies or the audit trail", async () => {
    const { body: key } = await newKey({ name: "leaky?", namespaces: ["own"] });
    const secret: string = key.secret;
    const hash = createHash("sha256").update(secret).digest("hex");
    const texts: string[] = [];
    const send = async (method: string, path: string, body?: unknown) => {
      const res = await s.api(method, path, body, { key: secret });
      texts.push(await res.text());
      return res.status;
    };
    expect(
      await send("POST", "/v1/memory", { namespace: "own", entity: "u", content: "secretive", infer: false }),
    ).toBe(200);
    expect(await send("POST", "/v1/memory", { namespace: "other", entity: "u", content: "x", infer: false })).toBe(403);
    expect(await send("POST", "/v1/memory", { namespace: "own", entity: "u", content: 5, infer: false })).toBe(400);
    expect(await send("GET", "/v1/memory/not-a-uuid")).toBe(404);
    expect(await send("GET", "/v1/keys")).toBe(403);
    expect(await send("GET", "/v1/nowhere")).toBe(404);
    // The secret sent where it does not belong, or slightly wrong: never echoed.
    for (const header of [`Bearer ${secret}x`, `Basic ${secret}`, `Bearer ${secret} ${secret}`, secret]) {
      const res = await fetch(`${s.url}/v1/memory?namespace=own`, { headers: { authorization: header } });
      expect(res.status).toBe(401);
      texts.push(await res.text());
    }
    const events = await s.json("GET", "/v1/memory/events?namespace=own");
    const mine = events.body.filter((e: { newContent: string }) => e.newContent === "secretive");
    expect(mine).toHaveLength(1);
    expect(mine[0].actorKeyId).toBe(key.id);
    texts.push(JSON.stringify(events.body));
    await s.settleLogs(); // onAfterResponse logs after the answer is sent
    const logs = s.logs.join("\n");
    expect(logs).toContain(key.id);
    for (const t of [...texts, logs]) {
      expect(t).not.toContain(secret);
      expect(t).not.toContain(secret.slice(5));
      expect(t).not.toContain(hash);
      expect(t).not.toContain(rootSecret);
    }
  });
});

describe("x-request-id", () => {
  test.each([
    ["200", "GET", "/v1/memory?namespace=own", rootSecret, 200],
    ["401", "GET", "/v1/memory?namespace=own", null, 401],
    ["401 unknown key", "GET", "/v1/keys", "memd_none", 401],
    ["404 route", "GET", "/nowhere", null, 404],
    ["404 route under /v1", "GET", "/v1/nowhere", rootSecret, 404],
    ["400", "GET", "/v1/memory?namespace=own&limit=0", rootSecret, 400],
    ["415", "POST", "/v1/memory", rootSecret, 415],
  ] as const)("on a %s answer, generated or echoed, and in the log line", async (name, method, path, key, status) => {
    const given = `trace/${name.replace(/\W/g, "_")} a:b=c;d`;
    const headers: Record<string, string> = key ? { authorization: `Bearer ${key}` } : {};
    if (method === "POST") headers["content-type"] = "text/plain";
    const generated = await fetch(s.url + path, { method, headers, body: method === "POST" ? "x" : undefined });
    expect(generated.status).toBe(status);
    expect(generated.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/);
    const echoed = await fetch(s.url + path, {
      method,
      headers: { ...headers, "x-request-id": given },
      body: method === "POST" ? "x" : undefined,
    });
    expect(echoed.headers.get("x-request-id")).toBe(given);
    const replaced = await fetch(s.url + path, {
      method,
      headers: { ...headers, "x-request-id": "bad id\u00e9" },
      body: method === "POST" ? "x" : undefined,
    });
    expect(replaced.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/);
    await s.settleLogs();
    for (const id of [generated.headers.get("x-request-id"), given]) {
      const line = s.logs.find((l) => l.includes(`"requestId":"${id}"`));
      expect(line).toBeDefined();
      expect(JSON.parse(line!)).toMatchObject({ msg: "request", method, status });
    }
  });
});
