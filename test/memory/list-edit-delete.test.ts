// @targets lmdb postgres binary
// Reading, correcting and deleting memories over HTTP: GET /v1/memory pages, PATCH, DELETE of an
// entity. Runs on both backends and the binary (its @targets line).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { dumpStorage, startTestServer, type TestServer } from "../helpers";

let s: TestServer;
let readKey: string;
let writeKey: string;
let otherKey: string;

beforeAll(async () => {
  s = await startTestServer();
  const key = async (permission: string, namespaces: string[]) =>
    (await s.json("POST", "/v1/keys", { name: permission, permission, namespaces })).body.secret as string;
  readKey = await key("read", ["*"]);
  writeKey = await key("read_write", ["*"]);
  otherKey = await key("read_write", ["elsewhere"]);
  // A key's first use records lastUsedAt; use each now, so that later "nothing changed" dumps hold.
  for (const k of [readKey, writeKey, otherKey])
    expect((await s.json("GET", "/v1/memory?namespace=elsewhere", undefined, { key: k })).status).toBe(200);
  await Bun.sleep(50);
});
afterAll(() => s.stop());

const store = async (namespace: string, entity: string, content: string, extra: Record<string, unknown> = {}) =>
  (await s.json("POST", "/v1/memory", { namespace, entity, content, infer: false, ...extra })).body.memories[0];

/** Every page of a list query, following nextCursor. */
async function allPages(query: string, limit: number) {
  const out: any[] = [];
  let cursor: string | null = null;
  for (let i = 0; i < 1000; i++) {
    const r: any = await s.json("GET", `/v1/memory?${query}&limit=${limit}${cursor ? `&cursor=${cursor}` : ""}`);
    expect(r.status).toBe(200);
    out.push(...r.body.memories);
    cursor = r.body.nextCursor;
    if (!cursor) return out;
  }
  throw new Error("no end to the pages");
}

describe("GET /v1/memory", () => {
  test("newest first, {memories, nextCursor}, pages that add up to the whole list", async () => {
    const ids: string[] = [];
    for (let i = 0; i < 7; i++) ids.push((await store("list", i % 2 ? "a" : "b", `fact ${i}`)).id);
    const first = await s.json("GET", "/v1/memory?namespace=list&limit=3");
    expect(first.status).toBe(200);
    expect(Object.keys(first.body).sort()).toEqual(["memories", "nextCursor"]);
    expect(first.body.memories.map((m: any) => m.id)).toEqual(ids.slice(-3).reverse());
    expect(typeof first.body.nextCursor).toBe("string");
    expect((await allPages("namespace=list", 3)).map((m) => m.id)).toEqual([...ids].reverse());
    expect((await allPages("namespace=list&entity=a", 2)).map((m) => m.content)).toEqual([
      "fact 5",
      "fact 3",
      "fact 1",
    ]);
    const all = await s.json("GET", "/v1/memory?namespace=list&limit=7");
    expect(all.body.nextCursor).toBeNull();
  });

  test("category and tag filters; every tag must match", async () => {
    await store("filt", "e", "one", { tags: ["x", "y"], category: "pref" });
    await store("filt", "e", "two", { tags: ["x"], category: "pref" });
    await store("filt", "e", "three", { tags: ["y"] });
    const contents = async (q: string) =>
      (await s.json("GET", `/v1/memory?namespace=filt&${q}`)).body.memories.map((m: any) => m.content);
    expect(await contents("tag=x")).toEqual(["two", "one"]);
    expect(await contents("tag=x&tag=y")).toEqual(["one"]);
    expect(await contents("category=pref&tag=y")).toEqual(["one"]);
    expect(await contents("category=general")).toEqual(["three"]);
  });

  test("paging while memories are added and removed never loses or repeats one that stays", async () => {
    const kept: string[] = [];
    const removable: string[] = [];
    for (let i = 0; i < 30; i++) {
      const id = (await store("churn", "e", `m ${i}`)).id;
      (i % 3 === 0 ? removable : kept).push(id);
    }
    const seen: string[] = [];
    let cursor: string | null = null;
    let round = 0;
    do {
      const r: any = await s.json("GET", `/v1/memory?namespace=churn&limit=4${cursor ? `&cursor=${cursor}` : ""}`);
      seen.push(...r.body.memories.map((m: any) => m.id));
      cursor = r.body.nextCursor;
      // Between pages: a new memory, and a delete of one not yet seen.
      await store("churn", "e", `new ${round}`);
      const victim = removable.pop();
      if (victim) await s.json("DELETE", `/v1/memory/${victim}`);
      round++;
    } while (cursor);
    expect(new Set(seen).size).toBe(seen.length);
    for (const id of kept) expect(seen).toContain(id);
  });

  test.each([
    ["malformed cursor", "namespace=list&cursor=notacursor", 400],
    ["cursor of another query", "", 400],
    ["forged cursor: the right query, a position that is not an id", "FORGED", 400],
    ["limit 0", "namespace=list&limit=0", 400],
    ["limit 1001", "namespace=list&limit=1001", 400],
    ["no namespace", "entity=a", 400],
    ["33 tags", `namespace=list&${Array.from({ length: 33 }, (_, i) => `tag=t${i}`).join("&")}`, 400],
    ["unknown parameter", "namespace=list&sort=asc", 400],
  ])("%s: %p", async (_name, query, status) => {
    let q = query;
    if (!q) {
      const page = await s.json("GET", "/v1/memory?namespace=list&limit=1");
      q = `namespace=list&entity=a&cursor=${page.body.nextCursor}`;
    } else if (q === "FORGED") {
      const page = await s.json("GET", "/v1/memory?namespace=list&limit=1");
      const real = JSON.parse(Buffer.from(page.body.nextCursor, "base64url").toString("utf8"));
      const forged = Buffer.from(JSON.stringify({ ...real, b: "-".repeat(36) })).toString("base64url");
      q = `namespace=list&cursor=${forged}`;
    }
    const r = await s.json("GET", `/v1/memory?${q}`);
    expect(r.status).toBe(status);
    expect(r.body.error.code).toBe("invalid_request");
  });

  test("a key without the namespace: 403", async () => {
    const r = await s.json("GET", "/v1/memory?namespace=list", undefined, { key: otherKey });
    expect(r).toMatchObject({ status: 403, body: { error: { code: "forbidden" } } });
  });
});

describe("PATCH /v1/memory/:id", () => {
  test("changes in place, records UPDATE (reason edited); content shows in the diff's updated", async () => {
    const m = await store("edit", "e", "Lives in Lisbon", { tags: ["home"], metadata: { a: 1 } });
    const since = new Date().toISOString();
    const r = await s.json("PATCH", `/v1/memory/${m.id}`, { content: "Lives in Porto", importance: 0.9 });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ id: m.id, content: "Lives in Porto", importance: 0.9, tags: ["home"] });
    const [ev] = (await s.json("GET", `/v1/memory/events?memoryId=${m.id}&limit=1`)).body;
    expect(ev).toMatchObject({
      event: "UPDATE",
      oldContent: "Lives in Lisbon",
      newContent: "Lives in Porto",
      reason: "edited",
    });
    const diff = (await s.json("POST", "/v1/memory/diff", { namespace: "edit", since })).body;
    expect(diff.updated).toEqual([
      expect.objectContaining({ id: m.id, content: "Lives in Porto", previousContent: "Lives in Lisbon" }),
    ]);

    // Other fields only: an UPDATE event, nothing in the diff.
    const since2 = new Date().toISOString();
    const r2 = await s.json("PATCH", `/v1/memory/${m.id}`, { tags: null, metadata: null, category: "place" });
    expect(r2.status).toBe(200);
    expect(r2.body.tags).toBeUndefined();
    expect(r2.body.metadata).toBeUndefined();
    expect(r2.body.category).toBe("place");
    const diff2 = (await s.json("POST", "/v1/memory/diff", { namespace: "edit", since: since2 })).body;
    expect(diff2.changeCount).toBe(0);
    const events = (await s.json("GET", `/v1/memory/events?memoryId=${m.id}`)).body;
    expect(events.map((e: any) => e.event)).toEqual(["UPDATE", "UPDATE", "ADD"]);
    expect((await s.json("GET", `/v1/memory/${m.id}`)).body).toMatchObject({ content: "Lives in Porto" });
  });

  test("bad requests change nothing", async () => {
    const m = await store("edit-bad", "e", "original", { tags: ["t"] });
    const gone = await store("edit-bad", "e", "deleted one");
    await s.json("DELETE", `/v1/memory/${gone.id}`);
    const before = await dumpStorage(s.server.core.storage);
    const cases: [string, string, unknown, number, string, string?][] = [
      ["empty body", m.id, {}, 400, "invalid_request"],
      ["changes nothing", m.id, { content: "original", tags: ["t"] }, 400, "invalid_request"],
      ["blank content", m.id, { content: "   " }, 400, "invalid_request"],
      ["unknown field", m.id, { content: "x", namespace: "other" }, 400, "invalid_request"],
      ["importance 2", m.id, { importance: 2 }, 400, "invalid_request"],
      ["blank tag", m.id, { tags: [" "] }, 400, "invalid_request"],
      ["bad id (an id that cannot exist does not exist)", "not-a-uuid", { content: "x" }, 404, "not_found"],
      ["unknown id", crypto.randomUUID(), { content: "x" }, 404, "not_found"],
      ["deleted memory", gone.id, { content: "x" }, 404, "not_found"],
      ["outside the key's namespaces", m.id, { content: "x" }, 404, "not_found", otherKey],
      ["read key", m.id, { content: "x" }, 403, "forbidden", readKey],
    ];
    for (const [name, id, body, status, code, key] of cases) {
      const r = await s.json("PATCH", `/v1/memory/${id}`, body, key ? { key } : undefined);
      expect({ name, status: r.status, code: r.body?.error?.code }).toEqual({ name, status, code });
    }
    // No body at all, with or without a JSON media type: 400 as well (not 415).
    for (const headers of [{ "content-type": "application/json" }, {}] as Record<string, string>[]) {
      const r = await s.api("PATCH", `/v1/memory/${m.id}`, undefined, { headers });
      expect({ headers, status: r.status, code: ((await r.json()) as any).error.code }).toEqual({
        headers,
        status: 400,
        code: "invalid_request",
      });
    }
    expect(await dumpStorage(s.server.core.storage)).toBe(before);
  });
});

describe("DELETE /v1/memory?namespace=&entity=", () => {
  test("deletes every current memory of the entity, one DELETE event each", async () => {
    for (let i = 0; i < 5; i++) await store("wipe", "a", `a ${i}`);
    const keep = await store("wipe", "b", "b stays");
    const r = await s.json("DELETE", "/v1/memory?namespace=wipe&entity=a", undefined, { key: writeKey });
    expect(r).toMatchObject({ status: 200, body: { deleted: 5 } });
    expect((await s.json("GET", "/v1/memory?namespace=wipe")).body.memories.map((m: any) => m.id)).toEqual([keep.id]);
    const events = (await s.json("GET", "/v1/memory/events?namespace=wipe&entity=a")).body;
    expect(events.filter((e: any) => e.event === "DELETE" && e.reason === "deleted")).toHaveLength(5);
    expect((await s.json("DELETE", "/v1/memory?namespace=wipe&entity=a")).body).toEqual({ deleted: 0 });
  });

  test("entity is required; bad queries and keys change nothing", async () => {
    await store("wipe2", "a", "x");
    const before = await dumpStorage(s.server.core.storage);
    const cases: [string, string, number, string?][] = [
      ["no entity", "namespace=wipe2", 400],
      ["no namespace", "entity=a", 400],
      ["empty entity", "namespace=wipe2&entity=", 400],
      ["unknown parameter", "namespace=wipe2&entity=a&all=1", 400],
      ["read key", "namespace=wipe2&entity=a", 403, readKey],
      ["other namespace", "namespace=wipe2&entity=a", 403, otherKey],
    ];
    for (const [name, q, status, key] of cases) {
      const r = await s.json("DELETE", `/v1/memory?${q}`, undefined, key ? { key } : undefined);
      expect({ name, status: r.status }).toEqual({ name, status });
    }
    expect(await dumpStorage(s.server.core.storage)).toBe(before);
  });
});
