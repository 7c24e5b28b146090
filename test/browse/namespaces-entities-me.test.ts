// @targets lmdb postgres binary
// The read endpoints for browsing (GET /v1/namespaces, /v1/entities, /v1/me) over HTTP, on LMDB, on
// PostgreSQL and against dist/memd.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { startTestServer, type TestServer } from "../helpers";

let s: TestServer;
const secrets: Record<string, string> = {};

async function makeKey(name: string, permission: string, namespaces: string[]) {
  const r = await s.json("POST", "/v1/keys", { name, permission, namespaces });
  expect(r.status).toBe(201);
  return r.body as { id: string; secret: string };
}

const store = (namespace: string, entity: string, content: string) =>
  s.json("POST", "/v1/memory", { namespace, entity, content, infer: false });

beforeAll(async () => {
  s = await startTestServer();
  for (const [ns, entity, content] of [
    ["team/a", "alice", "likes tea"],
    ["team/a", "alice", "lives in Lyon"],
    ["team/a", "bob", "plays chess"],
    ["team/b", "carol", "is vegetarian"],
    ["teamz", "dave", "outside the prefix"],
    ["other", "erin", "another namespace"],
  ])
    expect((await store(ns, entity, content)).status).toBe(200);
  secrets.team = (await makeKey("team reader", "read", ["team/*"])).secret;
  secrets.exact = (await makeKey("exact", "read_write", ["other", "missing"])).secret;
});
afterAll(() => s.stop());

describe("GET /v1/namespaces", () => {
  test("lists the namespaces that hold data, in name order, with counts and last event", async () => {
    const r = await s.json("GET", "/v1/namespaces");
    expect(r.status).toBe(200);
    expect(r.body.namespaces.map((n: { namespace: string }) => n.namespace)).toEqual([
      "other",
      "team/a",
      "team/b",
      "teamz",
    ]);
    const a = r.body.namespaces[1];
    expect(a.memories).toBe(3);
    const newest = (await s.json("GET", "/v1/memory/events?namespace=team/a&limit=1")).body[0];
    expect(a.lastEventAt).toBe(newest.createdAt);
    expect(r.body.nextCursor).toBeNull();
  });

  test("shows only what the key covers: a prefix pattern, exact names (one without data is absent)", async () => {
    const team = await s.json("GET", "/v1/namespaces", undefined, { key: secrets.team });
    expect(team.body.namespaces.map((n: { namespace: string }) => n.namespace)).toEqual(["team/a", "team/b"]);
    const exact = await s.json("GET", "/v1/namespaces", undefined, { key: secrets.exact });
    expect(exact.body.namespaces.map((n: { namespace: string }) => n.namespace)).toEqual(["other"]);
  });

  test("pages with limit and nextCursor, never losing or repeating a namespace", async () => {
    const seen: string[] = [];
    let cursor: string | null = null;
    for (let i = 0; i < 10; i++) {
      const q: string = cursor ? `?limit=1&cursor=${encodeURIComponent(cursor)}` : "?limit=1";
      const r = await s.json("GET", `/v1/namespaces${q}`);
      expect(r.status).toBe(200);
      seen.push(...r.body.namespaces.map((n: { namespace: string }) => n.namespace));
      cursor = r.body.nextCursor;
      if (!cursor) break;
    }
    expect(seen).toEqual(["other", "team/a", "team/b", "teamz"]);
    const scoped = await s.json("GET", "/v1/namespaces?limit=1", undefined, { key: secrets.team });
    const next = await s.json(
      "GET",
      `/v1/namespaces?limit=1&cursor=${encodeURIComponent(scoped.body.nextCursor)}`,
      undefined,
      { key: secrets.team },
    );
    expect(next.body).toEqual({ namespaces: [expect.objectContaining({ namespace: "team/b" })], nextCursor: null });
  });

  test.each([
    ["a cursor that is not one", "/v1/namespaces?cursor=nonsense", 400, "cursor"],
    ["a cursor of another query", "entities-cursor", 400, "cursor"],
    ["limit 0", "/v1/namespaces?limit=0", 400, "limit"],
    ["limit above 1000", "/v1/namespaces?limit=1001", 400, "limit"],
    ["an unknown parameter", "/v1/namespaces?namespace=x", 400, ""],
  ])("%s answers %d", async (_name, path, status, field) => {
    let url = path;
    if (path === "entities-cursor") {
      const e = await s.json("GET", "/v1/entities?namespace=team/a&limit=1");
      url = `/v1/namespaces?cursor=${encodeURIComponent(e.body.nextCursor)}`;
    }
    const r = await s.json("GET", url);
    expect(r.status).toBe(status);
    expect(r.body.error.code).toBe("invalid_request");
    expect(r.body.error.message).toContain(field);
  });

  test("needs a key", async () => {
    expect((await s.json("GET", "/v1/namespaces", undefined, { key: null })).status).toBe(401);
  });
});

describe("GET /v1/entities", () => {
  test("lists entities with current memory counts and last change; a deleted memory leaves the count", async () => {
    const r = await s.json("GET", "/v1/entities?namespace=team/a");
    expect(r.status).toBe(200);
    expect(r.body.entities.map((e: { entity: string; memories: number }) => [e.entity, e.memories])).toEqual([
      ["alice", 2],
      ["bob", 1],
    ]);
    const bobs = (await s.json("GET", "/v1/memory?namespace=team/a&entity=bob")).body;
    const bobMemories = Array.isArray(bobs) ? bobs : bobs.memories;
    expect((await s.json("DELETE", `/v1/memory/${bobMemories[0].id}`)).status).toBe(200);
    const after = await s.json("GET", "/v1/entities?namespace=team/a");
    const bob = after.body.entities.find((e: { entity: string }) => e.entity === "bob");
    expect(bob.memories).toBe(0);
    const newest = (await s.json("GET", "/v1/memory/events?namespace=team/a&entity=bob&limit=1")).body[0];
    expect(newest.event).toBe("DELETE");
    expect(bob.lastChangeAt).toBe(newest.createdAt);
  });

  test("pages with limit and nextCursor; a cursor of another namespace is refused", async () => {
    for (let i = 0; i < 5; i++) await store("paged", `e${i}`, `fact ${i}`);
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const q: string = cursor ? `&cursor=${encodeURIComponent(cursor)}` : "";
      const r = await s.json("GET", `/v1/entities?namespace=paged&limit=2${q}`);
      expect(r.status).toBe(200);
      expect(r.body.entities.length).toBeLessThanOrEqual(2);
      seen.push(...r.body.entities.map((e: { entity: string }) => e.entity));
      cursor = r.body.nextCursor;
    } while (cursor);
    expect(seen).toEqual(["e0", "e1", "e2", "e3", "e4"]);
    const first = await s.json("GET", "/v1/entities?namespace=paged&limit=2");
    const foreign = await s.json(
      "GET",
      `/v1/entities?namespace=team/a&cursor=${encodeURIComponent(first.body.nextCursor)}`,
    );
    expect(foreign.status).toBe(400);
    expect(foreign.body.error.message).toContain("cursor");
  });

  test("a namespace without data has no entities", async () => {
    expect((await s.json("GET", "/v1/entities?namespace=empty")).body).toEqual({ entities: [], nextCursor: null });
  });

  test.each([
    ["a foreign namespace", "/v1/entities?namespace=other", 403],
    ["no namespace", "/v1/entities", 400],
  ])("%s answers %d", async (_name, path, status) => {
    expect((await s.json("GET", path, undefined, { key: secrets.team })).status).toBe(status);
  });
});

describe("GET /v1/me", () => {
  test("the root key", async () => {
    const r = await s.json("GET", "/v1/me");
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ id: "root", permission: "admin", namespaces: ["*"] });
    expect(JSON.stringify(r.body)).not.toContain("hash");
  });

  test("a scoped key sees its own id, name, permission and patterns, never a secret", async () => {
    const k = await makeKey("me test", "read_write", ["team/*", "other"]);
    const r = await s.json("GET", "/v1/me", undefined, { key: k.secret });
    expect(r.body).toMatchObject({
      id: k.id,
      name: "me test",
      permission: "read_write",
      namespaces: ["team/*", "other"],
    });
    expect(JSON.stringify(r.body)).not.toContain(k.secret);
    expect((await s.json("GET", "/v1/me", undefined, { key: null })).status).toBe(401);
  });
});
