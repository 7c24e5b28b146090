// @targets lmdb postgres pgbouncer binary
// Idempotency-Key on POST /v1/memory, PATCH and DELETE: replays, reuse, concurrent duplicates,
// and no model call on a replay (the fake model counts its calls). Runs on both backends.
import { afterAll, beforeAll, beforeEach, describe, expect, test } from "bun:test";
import { IdempotencyKeyTaken } from "../../src/storage/storage";
import { type FakeModel, startFakeModel } from "../fake-model";
import { dumpStorage, startTestServer, type TestServer } from "../helpers";

const fake: FakeModel = startFakeModel();
let s: TestServer;
let otherKey: string;

beforeAll(async () => {
  s = await startTestServer({ env: { MEMD_LLM_BASE_URL: fake.url, MEMD_LLM_MODEL: "fake" } });
  otherKey = (await s.json("POST", "/v1/keys", { name: "other", permission: "read_write", namespaces: ["*"] })).body
    .secret;
  await s.json("GET", "/v1/memory?namespace=warm", undefined, { key: otherKey });
  await Bun.sleep(50);
});
afterAll(async () => {
  await s.stop();
  await fake.stop();
});
beforeEach(() => fake.reset());

const send = (method: string, path: string, body: unknown, idem: string, key?: string) =>
  s.api(method, path, body, {
    key,
    headers: { "idempotency-key": idem, ...(body !== undefined ? { "content-type": "application/json" } : {}) },
  });
const events = async (ns: string) => (await s.json("GET", `/v1/memory/events?namespace=${ns}&limit=1000`)).body;

const addAnswer = (fact: string) =>
  JSON.stringify({ operations: [{ fact, decision: "ADD", category: "fact", importance: 0.5 }] });

describe("replays", () => {
  test("a smart store repeated with the same key: the first answer, no second model call, nothing written", async () => {
    fake.reply(addAnswer("Likes green tea"));
    const body = { namespace: "idem", entity: "u", content: "I like green tea" };
    const first = await send("POST", "/v1/memory", body, "req-1");
    expect(first.status).toBe(200);
    const firstText = await first.text();
    expect(first.headers.get("idempotent-replayed")).toBeNull();
    expect(fake.calls).toBe(1);
    const before = await dumpStorage(s.server.core.storage);

    const again = await send("POST", "/v1/memory", body, "req-1");
    expect(again.status).toBe(200);
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    expect(await again.text()).toBe(firstText);
    expect(fake.calls).toBe(1);
    expect(await dumpStorage(s.server.core.storage)).toBe(before);
    expect((await events("idem")).filter((e: any) => e.event === "ADD")).toHaveLength(1);
  });

  test("the same key with another body: 422 idempotency_key_reused; another API key has its own keys", async () => {
    const body = { namespace: "idem2", entity: "u", content: "one", infer: false };
    expect((await send("POST", "/v1/memory", body, "k")).status).toBe(200);
    const other = await send("POST", "/v1/memory", { ...body, content: "two" }, "k");
    expect(other.status).toBe(422);
    expect(((await other.json()) as any).error.code).toBe("idempotency_key_reused");
    // The same key string under another API key is a different key.
    const mine = await send("POST", "/v1/memory", { ...body, content: "two" }, "k", otherKey);
    expect(mine.status).toBe(200);
    expect(mine.headers.get("idempotent-replayed")).toBeNull();
    expect((await events("idem2")).length).toBe(2);
  });

  test("PATCH and DELETE replay too; DELETE's replay answers as the first did, not 404", async () => {
    const m = (await s.json("POST", "/v1/memory", { namespace: "idem3", entity: "u", content: "a", infer: false })).body
      .memories[0];
    const p1 = await send("PATCH", `/v1/memory/${m.id}`, { content: "b" }, "p");
    const p2 = await send("PATCH", `/v1/memory/${m.id}`, { content: "b" }, "p");
    expect([p1.status, p2.status]).toEqual([200, 200]);
    expect(p2.headers.get("idempotent-replayed")).toBe("true");
    const d1 = await send("DELETE", `/v1/memory/${m.id}`, undefined, "d");
    const d2 = await send("DELETE", `/v1/memory/${m.id}`, undefined, "d");
    expect([d1.status, d2.status]).toEqual([200, 200]);
    expect(await d2.json()).toEqual({ deleted: true });
    expect(d2.headers.get("idempotent-replayed")).toBe("true");
    await s.json("POST", "/v1/memory", { namespace: "idem3", entity: "v", content: "c", infer: false });
    const e1 = await send("DELETE", "/v1/memory?namespace=idem3&entity=v", undefined, "e");
    const e2 = await send("DELETE", "/v1/memory?namespace=idem3&entity=v", undefined, "e");
    expect(await e1.json()).toEqual({ deleted: 1 });
    expect(await e2.json()).toEqual({ deleted: 1 });
    expect((await events("idem3")).map((e: any) => e.event)).toEqual(["DELETE", "ADD", "DELETE", "UPDATE", "ADD"]);
  });

  test("two identical requests at the same moment: one runs, the other waits and replays", async () => {
    // The model answers slowly, so the second request arrives while the first is running.
    fake.reply({ delayMs: 300, answer: addAnswer("Owns a bicycle") });
    const body = { namespace: "idem4", entity: "u", content: "I own a bicycle" };
    const [a, b] = await Promise.all([
      send("POST", "/v1/memory", body, "same"),
      send("POST", "/v1/memory", body, "same"),
    ]);
    expect([a.status, b.status]).toEqual([200, 200]);
    const replayed = [a, b].map((r) => r.headers.get("idempotent-replayed"));
    expect(replayed.sort()).toEqual(["true", null].sort() as any);
    expect(await a.text()).toBe(await b.text());
    expect(fake.calls).toBe(1);
    expect((await events("idem4")).length).toBe(1);
  });
});

describe("bad keys and failed requests", () => {
  test("a malformed Idempotency-Key: 400, nothing written", async () => {
    const before = await dumpStorage(s.server.core.storage);
    for (const bad of ["", "x".repeat(256), "tab\there", "é"]) {
      const r = await s.api(
        "POST",
        "/v1/memory",
        JSON.stringify({ namespace: "b", entity: "u", content: "c", infer: false }),
        {
          headers: { "content-type": "application/json", "idempotency-key": bad },
        },
      );
      // An empty header value is the same as none for some clients; fetch sends it, so it is refused.
      expect({ bad, status: r.status }).toEqual({ bad, status: 400 });
    }
    expect(await dumpStorage(s.server.core.storage)).toBe(before);
  });

  test("a request that fails keeps no answer: the retry runs (and may succeed)", async () => {
    // On PostgreSQL a smart store's first run for an entity creates its lock row (not data): left out.
    const records = async () =>
      (await dumpStorage(s.server.core.storage))
        .split("\n")
        .filter((l) => !l.startsWith("entity_locks "))
        .join("\n");
    const before = await records();
    fake.reply({ status: 500 });
    const body = { namespace: "idem5", entity: "u", content: "I like jazz" };
    const failed = await send("POST", "/v1/memory", body, "retry-me");
    expect(failed.status).toBe(502);
    expect(await records()).toBe(before);
    fake.reply(addAnswer("Likes jazz"));
    const calls = fake.calls;
    const ok = await send("POST", "/v1/memory", body, "retry-me");
    expect(ok.status).toBe(200);
    expect(ok.headers.get("idempotent-replayed")).toBeNull();
    expect(fake.calls).toBeGreaterThan(calls);
    const unknown = await send("PATCH", `/v1/memory/${crypto.randomUUID()}`, { content: "x" }, "p404");
    expect(unknown.status).toBe(404);
    const forbidden = await s.api(
      "POST",
      "/v1/memory",
      { namespace: "idem5", entity: "u", content: "c", infer: false },
      {
        key: (await s.json("POST", "/v1/keys", { name: "r", permission: "read", namespaces: ["*"] })).body.secret,
        headers: { "content-type": "application/json", "idempotency-key": "f" },
      },
    );
    expect(forbidden.status).toBe(403);
  });

  test("entries expire: the sweeper drops them after 24 hours", async () => {
    const storage = s.server.core.storage;
    // Times a day ahead: the server's own sweeper (real time) must not drop the entry first.
    const t = Date.now() + 86_400_000;
    const record = (hash: string, expiresAt: number) => ({
      keyId: "kx",
      key: "old",
      hash,
      expiresAt,
      answer: () => ({ status: 200, body: "{}" }),
    });
    await storage.apply([], "kx", t + 1000, record("h", t + 2000));
    expect((await storage.idempotentAnswer("kx", "old", t + 1500))?.body).toBe("{}");
    // Kept: the same key again writes nothing.
    expect(storage.apply([], "kx", t + 1500, record("h", t + 2000))).rejects.toBeInstanceOf(IdempotencyKeyTaken);
    expect(await storage.sweepIdempotency(t + 2500, 100)).toBeGreaterThanOrEqual(1);
    expect(await storage.idempotentAnswer("kx", "old", t + 1500)).toBeUndefined();
    // Expired (swept or not), the key is free again.
    await storage.apply([], "kx", t + 3000, record("other", t + 4000));
    expect((await storage.idempotentAnswer("kx", "old", t + 3500))?.hash).toBe("other");
    await storage.apply([], "kx", t + 5000, record("third", t + 6000));
    expect((await storage.idempotentAnswer("kx", "old", t + 5500))?.hash).toBe("third");
  });
});
