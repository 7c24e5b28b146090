// Operator-proofing (issue 8): one server per port and per data dir, a safe start-up order,
// one-line start failures, and the command line around them. Runs against source and binary.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { rootSecret, runMemd, spawnServer, startTestServer, type TestServer, tempDir } from "./helpers";

const dirs: (() => void)[] = [];
afterAll(() => {
  for (const cleanup of dirs) cleanup();
});
const fresh = () => {
  const t = tempDir("memd-op-");
  dirs.push(t.cleanup);
  return t.dir;
};

/** Runs a memd command to its end (bounded), with a clean environment. */
const memd = (args: string[], env: Record<string, string> = {}) =>
  runMemd(args, { PATH: process.env.PATH, HOME: process.env.HOME, TMPDIR: process.env.TMPDIR, ...env });

const stop = async (p: { proc: Bun.Subprocess }) => {
  p.proc.kill("SIGTERM");
  return p.proc.exited;
};

test("a second server on a taken port exits 1 with one line, creates nothing, and the first keeps every request", async () => {
  const a = await spawnServer(["--data-dir", fresh()], { MEMD_API_KEY: rootSecret });
  try {
    const port = new URL(a.url).port;
    const dataDir = join(fresh(), "second");
    const b = await memd(["serve", "--host", "127.0.0.1", "--port", port, "--data-dir", dataDir]);
    expect(b.code).toBe(1);
    expect(b.err).toBe(`memd: port ${port} on 127.0.0.1 is already in use\n`);
    expect(b.out).toBe("");
    expect(existsSync(dataDir)).toBe(false);
    // Every request reaches the one server: the same key is accepted 20 times out of 20.
    const statuses = await Promise.all(
      Array.from({ length: 20 }, () =>
        fetch(`${a.url}/v1/keys`, { headers: { authorization: `Bearer ${rootSecret}` } }).then((r) => r.status),
      ),
    );
    expect(statuses).toEqual(Array(20).fill(200));
  } finally {
    await stop(a);
  }
}, 30_000);

test("a data.mdb that is not an LMDB store: exit 1 with one line naming it (not a crash), for serve and the tools", async () => {
  const dir = fresh();
  writeFileSync(join(dir, "data.mdb"), "garbage, not a store\n".repeat(10));
  const file = join(dir, "data.mdb");
  const served = await memd(["serve", "--port", "0", "--data-dir", dir], { MEMD_API_KEY: rootSecret });
  expect([served.code, served.err]).toEqual([
    1,
    `memd: data dir ${dir}: cannot open the store: ${file} is not an LMDB store (damaged, or not written by memd)\n`,
  ]);
  const listed = await memd(["keys", "list", "--data-dir", dir]);
  expect(listed.code).toBe(1);
  expect(listed.err).toContain(`${file} is not an LMDB store`);
});

test("a second server on a data dir in use exits 1 naming the dir and the pid; keys and backup still work beside it", async () => {
  const dir = fresh();
  const a = await spawnServer(["--data-dir", dir], { MEMD_API_KEY: rootSecret });
  try {
    const b = await memd(["serve", "--port", "0", "--data-dir", dir], { MEMD_API_KEY: rootSecret });
    expect(b.code).toBe(1);
    expect(b.err).toBe(`memd: data dir ${dir} is in use by another memd server (pid ${a.proc.pid})\n`);
    expect(b.out).toBe("");
    const keys = await memd(["keys", "list", "--data-dir", dir]);
    expect([keys.code, keys.err]).toEqual([0, ""]);
    const dest = join(fresh(), "copy");
    const backup = await memd(["backup", dest, "--data-dir", dir]);
    expect([backup.code, backup.err]).toEqual([0, ""]);
  } finally {
    expect(await stop(a)).toBe(0);
  }
  // The lock goes with the process, even after kill -9: the next server starts.
  const c = await spawnServer(["--data-dir", dir], { MEMD_API_KEY: rootSecret });
  c.proc.kill("SIGKILL");
  await c.proc.exited;
  const d = await spawnServer(["--data-dir", dir], { MEMD_API_KEY: rootSecret });
  expect(await stop(d)).toBe(0);
}, 30_000);

test("a start that fails on its port prints and creates no root key; the next start prints it", async () => {
  const a = await spawnServer(["--data-dir", fresh()], { MEMD_API_KEY: rootSecret });
  const dir = fresh();
  try {
    const port = new URL(a.url).port;
    const b = await memd(["serve", "--port", port, "--data-dir", dir]);
    expect(b.code).toBe(1);
    expect(b.err).not.toContain("memd_");
  } finally {
    await stop(a);
  }
  const c = await spawnServer(["--data-dir", dir], { MEMD_API_KEY: "" });
  try {
    expect(c.stderr()).toMatch(/created a root key[\s\S]*memd_/);
  } finally {
    await stop(c);
  }
}, 30_000);

test.each([
  ["a file", (d: string) => writeFileSync(join(d, "f"), "x"), "f", "is a file, not a directory"],
  ["under a file", (d: string) => writeFileSync(join(d, "f"), "x"), "f/sub", "is a file, not a directory"],
])("a data dir that is %s: one line naming the path and the cause, exit 1, no port", async (_, setup, sub, cause) => {
  const d = fresh();
  setup(d);
  const path = join(d, sub);
  const r = await memd(["serve", "--port", "0", "--data-dir", path]);
  expect(r.code).toBe(1);
  expect(r.err).toBe(`memd: data dir ${path}: ${cause}\n`);
  expect(r.out).toBe("");
});

test("a data dir that cannot be created (under read-only /sys): one line naming the path and the cause, exit 1", async () => {
  const path = `/sys/memd-test-${process.pid}`;
  const r = await memd(["serve", "--port", "0", "--data-dir", path]);
  expect(r.code).toBe(1);
  expect(r.err).toMatch(new RegExp(`^memd: data dir ${path}: cannot be created: [a-z -]+\n$`));
  expect(r.out).toBe("");
});

test("--llm-model without --llm-base-url exits 2 with a message", async () => {
  const r = await memd(["serve", "--port", "0", "--data-dir", fresh(), "--llm-model", "qwen"]);
  expect(r.code).toBe(2);
  expect(r.err).toContain("--llm-model (MEMD_LLM_MODEL) needs --llm-base-url");
  const env = await memd(["serve", "--port", "0", "--data-dir", fresh()], { MEMD_LLM_MODEL: "qwen" });
  expect(env.code).toBe(2);
});

test("the start-up log names the extractor", async () => {
  const a = await spawnServer(["--data-dir", fresh()], { MEMD_API_KEY: rootSecret });
  await stop(a);
  expect(a.stdout()).toContain('"extractor":"built-in"');
  const b = await spawnServer(["--data-dir", fresh(), "--llm-base-url", "http://127.0.0.1:9/v1", "--llm-model", "m1"], {
    MEMD_API_KEY: rootSecret,
  });
  await stop(b);
  expect(b.stdout()).toContain('"extractor":"m1 at 127.0.0.1:9"');
});

test("memd backup works on a data dir with a dot in its name and leaves no stray lock file", async () => {
  const base = fresh();
  const dir = join(base, "memd-data.v2");
  const a = await spawnServer(["--data-dir", dir], { MEMD_API_KEY: rootSecret });
  const r = await fetch(`${a.url}/v1/memory`, {
    method: "POST",
    headers: { authorization: `Bearer ${rootSecret}`, "content-type": "application/json" },
    body: JSON.stringify({ namespace: "b", entity: "e", content: "kept", infer: false }),
  });
  expect(r.status).toBe(200);
  const dest = join(base, "copy.v2");
  const backup = await memd(["backup", dest, "--data-dir", dir]);
  await stop(a);
  expect([backup.code, backup.err]).toEqual([0, ""]);
  expect(existsSync(`${dir}-lock`)).toBe(false);
  expect(existsSync(`${dest}-lock`)).toBe(false);
  const restored = await spawnServer(["--data-dir", dest], { MEMD_API_KEY: rootSecret });
  try {
    const list = await fetch(`${restored.url}/v1/memory?namespace=b`, {
      headers: { authorization: `Bearer ${rootSecret}` },
    });
    const { memories } = (await list.json()) as { memories: { content: string }[] };
    expect(memories.map((m) => m.content)).toEqual(["kept"]);
  } finally {
    await stop(restored);
  }
}, 30_000);

test("the lock file names the pid of the server holding the data dir", async () => {
  const dir = fresh();
  mkdirSync(dir, { recursive: true });
  const a = await spawnServer(["--data-dir", dir], { MEMD_API_KEY: rootSecret });
  try {
    expect(readFileSync(join(dir, "memd.lock"), "utf8").trim()).toBe(String(a.proc.pid));
  } finally {
    await stop(a);
  }
});

describe("bad input and answers a client can act on", () => {
  let s: TestServer;
  beforeAll(async () => (s = await startTestServer()));
  afterAll(() => s.stop());
  const raw = (method: string, path: string, body?: string, headers: Record<string, string> = {}) =>
    fetch(s.url + path, {
      method,
      headers: { authorization: `Bearer ${rootSecret}`, "content-type": "application/json", ...headers },
      body,
    });
  const store = { namespace: "op", entity: "e", content: "fact", infer: false };

  test.each([
    [
      "__proto__ at the top",
      `{"namespace":"op","entity":"e","content":"c","infer":false,"__proto__":{"tags":["x"],"source":"y"}}`,
      "__proto__",
    ],
    [
      "constructor at the top",
      `{"namespace":"op","entity":"e","content":"c","infer":false,"constructor":{"a":1}}`,
      "constructor",
    ],
    ["prototype at the top", `{"namespace":"op","entity":"e","content":"c","infer":false,"prototype":1}`, "prototype"],
    [
      "__proto__ inside metadata",
      `{"namespace":"op","entity":"e","content":"c","infer":false,"metadata":{"__proto__":{"a":1}}}`,
      "metadata.__proto__",
    ],
    [
      "__proto__ deep inside metadata",
      `{"namespace":"op","entity":"e","content":"c","infer":false,"metadata":{"a":[{"__proto__":1}]}}`,
      "metadata.a[0].__proto__",
    ],
  ])("%s: 400 naming the path, nothing stored", async (_, body, field) => {
    const r = await raw("POST", "/v1/memory", body);
    expect(r.status).toBe(400);
    const b = (await r.json()) as { error: { code: string; details: { field: string }[] } };
    expect(b.error.code).toBe("invalid_request");
    expect(b.error.details.map((d) => d.field)).toEqual([field]);
  });

  test("constructor and prototype inside metadata round-trip exactly", async () => {
    const metadata = { constructor: { name: "x" }, prototype: [1, 2], nested: { constructor: "y" } };
    const r = await s.json("POST", "/v1/memory", { ...store, metadata });
    expect(r.status).toBe(200);
    expect(r.body.memories[0].metadata).toEqual(metadata);
    const again = await s.json("GET", `/v1/memory/${r.body.memories[0].id}`);
    expect(again.body.metadata).toEqual(metadata);
    expect(again.body.tags).toBeUndefined();
  });

  test.each([
    ["/v1/memory?namespace=%FF%FE", "namespace"],
    ["/v1/memory?namespace=a%80", "namespace"],
    ["/v1/memory?namespace=%C3%28", "namespace"],
    ["/v1/memory/events?namespace=op&entity=%E0%A4", "entity"],
    ["/v1/memory?namespace=a%01b", "namespace"],
    ["/v1/memory?namespace=a%C2%85b", "namespace"],
    ["/v1/memory?namespace=a&namespace=b", "namespace"],
    ["/v1/memory/events?namespace=op&limit=1&limit=2", "limit"],
  ])("GET %s: 400 naming %s", async (path, field) => {
    const r = await s.json("GET", path);
    expect(r.status).toBe(400);
    expect(r.body.error.details.map((d: { field: string }) => d.field)).toEqual([field]);
  });

  test("a valid escape is read as the name it encodes", async () => {
    expect((await s.json("POST", "/v1/memory", { ...store, namespace: "café" })).status).toBe(200);
    const r = await s.json("GET", "/v1/memory?namespace=caf%C3%A9");
    expect(r.body.memories.map((m: { namespace: string }) => m.namespace)).toEqual(["café"]);
  });

  test.each([
    ["text/plain", "hello", { "content-type": "text/plain" }],
    ["nested JSON", `${"[".repeat(5000)}${"]".repeat(5000)}`, {}],
    ["an empty object", "{}", {}],
  ])("DELETE with a body (%s) is refused and deletes nothing", async (_, body, headers) => {
    const id = (await s.json("POST", "/v1/memory", store)).body.memories[0].id;
    const r = await raw("DELETE", `/v1/memory/${id}`, body, headers);
    expect(r.status).toBe(400);
    expect(((await r.json()) as { error: { code: string } }).error.code).toBe("invalid_request");
    expect((await s.json("GET", `/v1/memory/${id}`)).status).toBe(200);
  });

  test("DELETE /v1/memory/:id without a body answers 200 {deleted: true}", async () => {
    const id = (await s.json("POST", "/v1/memory", store)).body.memories[0].id;
    const r = await s.json("DELETE", `/v1/memory/${id}`);
    expect([r.status, r.body]).toEqual([200, { deleted: true }]);
  });

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
        { field: "tags[0]", message: "must be a string of 1 to 64 characters without control characters" },
        { field: "tags[1]", message: "must be a string of 1 to 64 characters without control characters" },
        { field: "tags[2]", message: "must be a string of 1 to 64 characters without control characters" },
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
});

test("a model that cannot be reached: the log names host and cause, never the key", async () => {
  const t = await startTestServer({
    env: { MEMD_LLM_BASE_URL: "http://127.0.0.1:1/v1", MEMD_LLM_MODEL: "m", MEMD_LLM_API_KEY: "sk-never-logged-123" },
  });
  try {
    const r = await t.json("POST", "/v1/memory", { namespace: "n", entity: "u", content: "I like tea" });
    expect(r.status).toBe(502);
    await t.settleLogs();
    const line = t.logs.find((l) => l.includes('"model call failed"'));
    expect(JSON.parse(line!)).toMatchObject({ level: "warn", cause: "127.0.0.1:1: connection refused" });
    expect(t.logs.join("\n")).not.toContain("sk-never-logged-123");
  } finally {
    await t.stop();
  }
});
