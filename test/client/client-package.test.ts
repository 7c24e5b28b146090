import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { rootSecret, spawnServer, tempDir } from "../helpers";
import { within } from "../sse";

const repo = join(import.meta.dir, "../..");

// The client as it ships: built into client/dist (ESM + .d.ts) by the same script as `make build`.
let client: typeof import("../../client/src/index");
let testkit: typeof import("../../client/src/testkit");
beforeAll(async () => {
  const check = Bun.spawnSync([process.execPath, "run", "scripts/client-types.ts", "--check"], { cwd: repo });
  if (check.exitCode !== 0) throw new Error(check.stderr.toString());
  const build = Bun.spawnSync([process.execPath, "run", "client/build.ts"], { cwd: repo, stderr: "pipe" });
  if (build.exitCode !== 0) throw new Error(`client build failed: ${build.stderr.toString()}`);
  client = await import(join(repo, "client/dist/index.js"));
  testkit = await import(join(repo, "client/dist/testkit.js"));
}, 120_000);

test("the generated types are current", () => {
  // beforeAll ran scripts/client-types.ts --check; the declarations exist next to the JS.
  for (const f of ["index.d.ts", "testkit.d.ts", "types.gen.d.ts"])
    expect(Bun.file(join(repo, "client/dist", f)).size).toBeGreaterThan(0);
});

describe("built client against a server started by the built test kit", () => {
  let memd: Awaited<ReturnType<typeof testkit.startMemd>>;
  beforeAll(async () => {
    memd = await testkit.startMemd({
      model: (req) => {
        const text = JSON.stringify(req.messages);
        return text.includes("bad answer please")
          ? "not json at all"
          : { operations: [{ fact: "User likes green tea", decision: "ADD", category: "preference" }] };
      },
    });
  });
  afterAll(() => memd.stop());

  test("every method, and MemdError", async () => {
    const c = memd.client;
    const smart = await c.store({ namespace: "ns", entity: "u", content: "I like green tea" });
    expect(smart.memories[0].content).toBe("User likes green tea");
    expect(memd.modelRequests.length).toBe(1);
    const raw = await c.store({ namespace: "ns", entity: "u", content: "raw fact", infer: false, tags: ["t"] });
    const id = raw.memories[0].id;
    expect((await c.get(id)).tags).toEqual(["t"]);
    const page = await c.list({ namespace: "ns", entity: "u", limit: 1 });
    expect(page.memories.map((m) => m.id)).toEqual([id]);
    const rest = await c.list({ namespace: "ns", entity: "u", limit: 1, cursor: page.nextCursor! });
    expect(rest.memories.map((m) => m.content)).toEqual(["User likes green tea"]);
    expect((await c.list({ namespace: "ns", tags: ["t"] })).memories.map((m) => m.id)).toEqual([id]);
    const edited = await c.update(id, { content: "raw fact, edited", tags: null });
    expect([edited.content, edited.tags]).toEqual(["raw fact, edited", undefined]);
    expect((await c.events({ memoryId: id, limit: 1 }))[0]).toMatchObject({ event: "UPDATE", reason: "edited" });
    expect((await c.events({ namespace: "ns", limit: 1 }))[0].memoryId).toBe(id);
    expect((await c.events({ memoryId: id })).map((e) => e.event)).toEqual(["UPDATE", "ADD"]);
    expect((await c.diff({ namespace: "ns" })).created.length).toBe(2);
    expect(await c.delete(id)).toEqual({ deleted: true });

    const err = await c.get(id).catch((e) => e);
    expect(err).toBeInstanceOf(client.MemdError);
    expect([err.status, err.code]).toEqual([404, "not_found"]);
    const bad = await c.store({ namespace: "ns", entity: "u", content: "bad answer please" }).catch((e) => e);
    expect([bad.status, bad.code]).toEqual([502, "llm_bad_output"]);

    const key = await c.keys.create({ name: "reader", permission: "read", namespaces: ["ns"] });
    expect(key.secret.length).toBeGreaterThan(10);
    expect((await c.keys.get(key.id)).name).toBe("reader");
    expect((await c.keys.list()).map((k) => k.id)).toContain(key.id);
    const reader = client.createClient({ url: memd.url, key: key.secret });
    expect((await reader.list({ namespace: "ns" })).memories.length).toBe(1);
    const forbidden = await reader.list({ namespace: "other" }).catch((e) => e);
    expect([forbidden.status, forbidden.code]).toEqual([403, "forbidden"]);
    const cannot = await reader.store({ namespace: "ns", entity: "u", content: "x", infer: false }).catch((e) => e);
    expect(cannot.code).toBe("forbidden");
    expect(await c.keys.revoke(key.id)).toEqual({ id: key.id, revoked: true });
    expect((await reader.list({ namespace: "ns" }).catch((e) => e)).status).toBe(401);

    await c.store({ namespace: "ns", entity: "gone", content: "one", infer: false });
    await c.store({ namespace: "ns", entity: "gone", content: "two", infer: false });
    expect(await c.deleteEntity({ namespace: "ns", entity: "gone" })).toEqual({ deleted: 2 });
    await c.store({ namespace: "ns", entity: "forget-me", content: "secret", infer: false });
    expect(await c.erase({ namespace: "ns", entity: "forget-me" })).toMatchObject({ entity: "forget-me", memories: 1 });
    expect((await c.erasures({ namespace: "ns" })).map((e) => e.entity)).toEqual(["forget-me"]);

    // The browsing reads and the export.
    expect(await c.me()).toMatchObject({ permission: "admin", namespaces: ["*"] });
    const nss = await c.namespaces({ limit: 1 });
    expect(nss.namespaces).toHaveLength(1);
    const more = await c.namespaces({ cursor: nss.nextCursor! });
    expect([...nss.namespaces, ...more.namespaces].map((n) => n.namespace)).toContain("ns");
    const ents = await c.entities({ namespace: "ns" });
    expect(ents.entities.map((e) => e.entity)).toEqual(expect.arrayContaining(["u", "gone", "forget-me"]));
    const lines = [];
    for await (const line of c.export({ namespaces: ["ns"] })) lines.push(line);
    expect(lines[0]).toMatchObject({ type: "header" });
    expect(lines.filter((l) => l.type === "memory").length).toBeGreaterThan(2);
    expect(lines.every((l) => l.type === "header" || l.namespace === "ns")).toBe(true);
    const notAdmin = client.createClient({
      url: memd.url,
      key: (await c.keys.create({ name: "w", permission: "read_write", namespaces: ["ns"] })).secret,
    });
    const refused = await notAdmin
      .export()
      .next()
      .catch((e) => e);
    expect([refused.status, refused.code]).toEqual([403, "forbidden"]);

    const invalid = await c.diff({ namespace: "ns", since: "yesterday" }).catch((e) => e);
    expect(invalid.details).toEqual([{ field: "since", message: expect.any(String) }]);
    const found = await c.search({ namespace: "ns", query: "green tea" });
    expect(found.mode).toBe("keyword");
    expect(found.results.map((m) => m.content)).toEqual(["User likes green tea"]);
    expect(found.results[0].score).toBeGreaterThan(0);
    const blank = await c.search({ namespace: "ns", query: "  " }).catch((e) => e);
    expect([blank.status, blank.code]).toEqual([400, "invalid_request"]);
    const down = await client
      .createClient({ url: "http://127.0.0.1:9", key: "k" })
      .list({ namespace: "ns" })
      .catch((e) => e);
    expect([down.status, down.code]).toEqual([0, "network_error"]);
  });

  test("writes take an Idempotency-Key per call: a retry gets the first answer and writes nothing", async () => {
    const c = memd.client;
    const req = { namespace: "idem", entity: "u", content: "Ordered a bike", infer: false };
    const first = await c.store(req, { idempotencyKey: "order-1" });
    expect(await c.store(req, { idempotencyKey: "order-1" })).toEqual(first);
    expect((await c.list({ namespace: "idem" })).memories).toHaveLength(1);
    const reused = await c.store({ ...req, content: "Ordered a car" }, { idempotencyKey: "order-1" }).catch((e) => e);
    expect([reused.status, reused.code]).toEqual([422, "idempotency_key_reused"]);
    const id = first.memories[0].id;
    const edited = await c.update(id, { content: "Ordered a red bike" }, { idempotencyKey: "edit-1" });
    expect(await c.update(id, { content: "Ordered a red bike" }, { idempotencyKey: "edit-1" })).toEqual(edited);
    expect(await c.delete(id, { idempotencyKey: "del-1" })).toEqual({ deleted: true });
    expect(await c.delete(id, { idempotencyKey: "del-1" })).toEqual({ deleted: true });
    expect((await c.events({ memoryId: id })).map((e) => e.event)).toEqual(["DELETE", "UPDATE", "ADD"]);
    await c.store({ ...req, entity: "v" });
    const q = { namespace: "idem", entity: "v" };
    expect(await c.deleteEntity(q, { idempotencyKey: "ent-1" })).toEqual({ deleted: 1 });
    expect(await c.deleteEntity(q, { idempotencyKey: "ent-1" })).toEqual({ deleted: 1 });
  });

  /** A fetch that answers `status` to the first `fail` requests (without sending them on), noting every request's headers. */
  const flaky = (fail: number, status = 503, retryAfter: string | null = "0") => {
    const seen: Headers[] = [];
    const f = (async (input: string | URL | Request, init?: RequestInit) => {
      seen.push(new Headers(init?.headers));
      if (seen.length <= fail)
        return Response.json(
          { error: { code: status === 429 ? "rate_limited" : "storage_unavailable", message: "try again" } },
          { status, headers: retryAfter === null ? {} : { "retry-after": retryAfter } },
        );
      return fetch(input, init);
    }) as typeof fetch;
    return { seen, fetch: f };
  };

  test("a write retried after 503 carries one Idempotency-Key and writes once; each call its own key", async () => {
    const f = flaky(2);
    const c = client.createClient({ url: memd.url, key: memd.key, fetch: f.fetch });
    const stored = await c.store({ namespace: "retry", entity: "u", content: "once only", infer: false });
    const keys = f.seen.map((h) => h.get("idempotency-key"));
    expect(keys).toHaveLength(3);
    expect(keys[0]).toBeTruthy();
    expect(new Set(keys).size).toBe(1);
    expect((await memd.client.list({ namespace: "retry" })).memories.map((m) => m.id)).toEqual([stored.memories[0].id]);

    const g = flaky(0);
    const d = client.createClient({ url: memd.url, key: memd.key, fetch: g.fetch });
    await d.store({ namespace: "retry", entity: "u", content: "second", infer: false });
    await d.store({ namespace: "retry", entity: "u", content: "third", infer: false }, { idempotencyKey: "mine-1" });
    await d.update(stored.memories[0].id, { content: "edited" });
    await d.delete(stored.memories[0].id);
    const sent = g.seen.map((h) => h.get("idempotency-key"));
    expect(sent[1]).toBe("mine-1");
    expect(sent.every(Boolean)).toBe(true);
    expect(new Set(sent).size).toBe(4);
  });

  test("retries are bounded, wait 0.5 s doubling without Retry-After, and happen only where repeating is safe", async () => {
    const f = flaky(10, 503, null);
    const c = client.createClient({ url: memd.url, key: memd.key, fetch: f.fetch, maxRetries: 2 });
    const t0 = performance.now();
    const failed = await c.list({ namespace: "retry" }).catch((e) => e);
    expect([failed.status, failed.code, f.seen.length]).toEqual([503, "storage_unavailable", 3]);
    expect(performance.now() - t0).toBeGreaterThanOrEqual(1400); // 0.5 s, then 1 s

    // An erase cannot be repeated safely; without automatic keys, a store neither: a 503 at once.
    for (const make of [
      (x: typeof c) => x.erase({ namespace: "retry", entity: "nobody" }),
      (x: typeof c) => x.store({ namespace: "retry", entity: "u", content: "unkeyed", infer: false }),
    ]) {
      const g = flaky(10);
      const x = client.createClient({ url: memd.url, key: memd.key, fetch: g.fetch, idempotencyKeys: false });
      expect((await make(x).catch((e) => e)).status).toBe(503);
      expect(g.seen).toHaveLength(1);
      expect(g.seen[0].get("idempotency-key")).toBeNull();
    }

    // A 429 is retried (it was refused before it ran), waiting Retry-After; one longer than
    // maxRetryWaitMs is thrown at once.
    const h = flaky(1, 429, "0");
    const y = client.createClient({ url: memd.url, key: memd.key, fetch: h.fetch, idempotencyKeys: false });
    expect(
      (await y.store({ namespace: "retry", entity: "u", content: "after 429", infer: false })).memories,
    ).toHaveLength(1);
    expect(h.seen).toHaveLength(2);
    const long = flaky(10, 429, "120");
    const z = client.createClient({ url: memd.url, key: memd.key, fetch: long.fetch });
    const limited = await z.me().catch((e) => e);
    expect([limited.status, limited.code, long.seen.length]).toEqual([429, "rate_limited", 1]);
  });

  test("a request that outlasts timeoutMs is a MemdError timeout, not repeated", async () => {
    let calls = 0;
    const hung = Bun.serve({
      port: 0,
      hostname: "127.0.0.1",
      fetch() {
        calls++;
        return new Promise<Response>(() => {}); // never answers
      },
    });
    try {
      const c = client.createClient({ url: `http://127.0.0.1:${hung.port}`, key: "k", timeoutMs: 300 });
      const e = await c.store({ namespace: "t", entity: "u", content: "slow please", infer: false }).catch((x) => x);
      expect([e.status, e.code, calls]).toEqual([0, "timeout", 1]);
    } finally {
      hung.stop(true);
    }
  });

  test("stream() refuses what a retry cannot fix", async () => {
    const it = memd.client.stream({ namespace: "ns", after: "garbage" });
    const err = await it.next().catch((e) => e);
    expect([err.status, err.code]).toEqual([400, "invalid_request"]);
  });
});

test("stream() waits at least the server's Retry-After before reconnecting after a 503", async () => {
  const tries: number[] = [];
  const fake = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    fetch() {
      tries.push(performance.now());
      if (tries.length === 1)
        return Response.json(
          { error: { code: "shutting_down", message: "x" } },
          { status: 503, headers: { "retry-after": "1" } },
        );
      const event = { event: "ADD", memoryId: "m", newContent: "after the wait" };
      return new Response(`id: c1\nevent: memory\ndata: ${JSON.stringify(event)}\n\n`, {
        headers: { "content-type": "text/event-stream" },
      });
    },
  });
  try {
    const c = client.createClient({ url: `http://127.0.0.1:${fake.port}`, key: "k" });
    for await (const m of c.stream({ namespace: "s", retryMs: 10 })) {
      expect(m).toMatchObject({ cursor: "c1", event: { newContent: "after the wait" } });
      break;
    }
    // retryMs alone would have reconnected after 10 ms; the server asked for 1 s.
    expect(tries[1] - tries[0]).toBeGreaterThanOrEqual(950);
  } finally {
    fake.stop(true);
  }
});

test("stream() resumes by itself across a server restart, losing and repeating nothing", async () => {
  const tmp = tempDir();
  let server = await spawnServer(["--data-dir", tmp.dir], { MEMD_API_KEY: rootSecret });
  const port = new URL(server.url).port;
  try {
    const c = client.createClient({ url: server.url, key: rootSecret });
    const store = (content: string) => c.store({ namespace: "s", entity: "e", content, infer: false });
    const got: string[] = [];
    const abort = new AbortController();
    let wake = () => {};
    const following = (async () => {
      for await (const m of c.stream({ namespace: "s", since: "2000-01-01", signal: abort.signal, retryMs: 50 })) {
        got.push(m.event.newContent!);
        wake();
      }
    })();
    const until = (n: number) =>
      within(
        30_000,
        `${n} events (have ${got.length})`,
        (async () => {
          while (got.length < n) await new Promise<void>((r) => (wake = r));
        })(),
      );
    for (const x of ["a", "b", "c"]) await store(x);
    await until(3);
    server.proc.kill("SIGKILL");
    await server.proc.exited;
    server = await spawnServer(["--data-dir", tmp.dir, "--port", port], { MEMD_API_KEY: rootSecret });
    for (const x of ["d", "e"]) await store(x);
    await until(5);
    abort.abort();
    await within(5_000, "stream end", following);
    expect(got).toEqual(["a", "b", "c", "d", "e"]);
  } finally {
    server.proc.kill("SIGTERM");
    await within(15_000, "server exit", server.proc.exited);
    tmp.cleanup();
  }
}, 60_000);
