// @targets lmdb postgres binary
/**
 * mem0's REST API over plain HTTP, for what the TypeScript client does not send: the v1 and v2
 * paths of older clients, OR and `in` filters, threshold, `Token` and `Bearer`, how a call
 * finds its namespace, mem0's error shape, and ids that round-trip with memd's own API.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { rootSecret, startTestServer, type TestServer } from "../helpers";
import { subscribe } from "../sse";

let s: TestServer;
let acme: { id: string; secret: string };

type Init = { key?: string; scheme?: string; headers?: Record<string, string> };
/** A mem0 call as the clients make it: `Authorization: Token <key>`. */
async function mem0(method: string, path: string, body?: unknown, init: Init = {}) {
  const headers: Record<string, string> = {
    authorization: `${init.scheme ?? "Token"} ${init.key ?? acme.secret}`,
    ...init.headers,
  };
  if (body !== undefined) headers["content-type"] = "application/json";
  const res = await fetch(s.url + path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined, type: res.headers.get("content-type") };
}
const add = (user: string, content: string, extra: Record<string, unknown> = {}) =>
  mem0("POST", "/v1/memories/", { messages: content, user_id: user, infer: false, ...extra });

beforeAll(async () => {
  s = await startTestServer();
  const r = await s.json("POST", "/v1/keys", { name: "acme", permission: "read_write", namespaces: ["acme"] });
  acme = r.body;
  for (const [user, text] of [
    ["ann", "Ann rides a red bicycle"],
    ["ann", "Ann bakes sourdough bread"],
    ["ben", "Ben rides a blue bicycle"],
    ["cy", "Cy rides a green bicycle"],
  ] as const)
    expect((await add(user, text)).status).toBe(200);
});
afterAll(() => s.stop());

describe("mem0 paths the TypeScript client does not use", () => {
  test("ping answers the status the clients check", async () => {
    const r = await mem0("GET", "/v1/ping/");
    expect(r).toMatchObject({ status: 200, body: { status: "ok", namespace: "acme", key_id: acme.id } });
    // The Python client's project manager refuses to start without both.
    expect(r.body.org_id).toBeTruthy();
    expect(r.body.project_id).toBeTruthy();
  });

  test("Token and Bearer both carry the key; another scheme is a 401 in mem0's shape", async () => {
    expect((await mem0("GET", "/v1/memories/?user_id=ann", undefined, { scheme: "Bearer" })).status).toBe(200);
    expect((await mem0("GET", "/v1/memories/?user_id=ann", undefined, { scheme: "token" })).status).toBe(200);
    const r = await mem0("GET", "/v1/memories/?user_id=ann", undefined, { scheme: "Basic" });
    expect(r.status).toBe(401);
    expect(r.type).toStartWith("application/json");
    expect(r.body).toEqual({ detail: "malformed Authorization header; expected Bearer <key>", code: "unauthorized" });
    // memd's own API takes Token too: one authentication.
    const own = await fetch(`${s.url}/v1/memory?namespace=acme`, {
      headers: { authorization: `Token ${acme.secret}` },
    });
    expect(own.status).toBe(200);
  });

  test("v3 add with a message list, and v2 search with OR and in filters, top_k and threshold", async () => {
    const r = await mem0("POST", "/v3/memories/add/", {
      messages: [
        { role: "system", content: "You are helpful" },
        { role: "user", content: "Dee rides a yellow bicycle" },
      ],
      user_id: "dee",
      infer: false,
      output_format: "v1.1",
      version: "v2",
      async_mode: false,
    });
    expect(r.status).toBe(200);
    // The system message is not stored, as mem0 does not store it.
    expect(r.body.results.map((m: any) => m.memory)).toEqual(["Dee rides a yellow bicycle"]);

    const or = await mem0("POST", "/v2/memories/search/", {
      query: "bicycle",
      filters: { OR: [{ user_id: "ann" }, { user_id: { in: ["ben", "dee"] } }] },
    });
    expect(or.status).toBe(200);
    expect(or.body.results.map((m: any) => m.user_id).sort()).toEqual(["ann", "ben", "dee"]);
    const scores = or.body.results.map((m: any) => m.score);
    expect(scores).toEqual([...scores].sort((a, b) => b - a));

    const top = await mem0("POST", "/v3/memories/search/", { query: "bicycle", top_k: 2 });
    expect(top.body.results).toHaveLength(2);
    const high = await mem0("POST", "/v3/memories/search/", { query: "bicycle", threshold: 1e9 });
    expect(high.body.results).toEqual([]);
    // Older clients: v1 search with the ids at the top level, and output_format v1.0 (a bare list).
    const v1 = await mem0("POST", "/v1/memories/search/", { query: "bicycle", user_id: "ben", output_format: "v1.0" });
    expect(v1.body.map((m: any) => m.memory)).toEqual(["Ben rides a blue bicycle"]);
    const v1add = await add("ben", "Ben fixes flats", { output_format: "v1.0" });
    expect(v1add.body.map((m: any) => [m.memory, m.event])).toEqual([["Ben fixes flats", "ADD"]]);
    const not = await mem0("POST", "/v3/memories/search/", {
      query: "bicycle",
      filters: { AND: [{ user_id: "*" }, { NOT: [{ user_id: { in: ["ann", "ben"] } }] }] },
    });
    expect(not.body.results.map((m: any) => m.user_id).sort()).toEqual(["cy", "dee"]);
  });

  test("get all: v2 with page in the body, v1 as a plain list or, with page and page_size, an envelope", async () => {
    const v2 = await mem0("POST", "/v2/memories/", { filters: { user_id: "ann" }, page: 2, page_size: 1 });
    expect(v2.body).toMatchObject({ count: 2, next: null });
    expect(v2.body.previous).toContain("page=1");
    expect(v2.body.results.map((m: any) => m.memory)).toEqual(["Ann rides a red bicycle"]);

    const plain = await mem0("GET", "/v1/memories/?user_id=ann");
    expect(plain.body.map((m: any) => m.memory)).toEqual(["Ann bakes sourdough bread", "Ann rides a red bicycle"]);
    const paged = await mem0("GET", "/v1/memories/?user_id=ann&page=1&page_size=1");
    expect(paged.body).toMatchObject({ count: 2, previous: null });
    expect(paged.body.next).toContain("page=2");
  });

  test("ids round-trip: memd's entity is mem0's user_id, agent and run ids are tags memd can filter on", async () => {
    // Stored by memd's own API, found by mem0's.
    const own = await s.json("POST", "/v1/memory", {
      namespace: "acme",
      entity: "eve",
      content: "Eve flies kites",
      infer: false,
    });
    const found = await mem0("GET", "/v1/memories/?user_id=eve");
    expect(found.body.map((m: any) => [m.id, m.memory, m.user_id])).toEqual([
      [own.body.memories[0].id, "Eve flies kites", "eve"],
    ]);
    // Stored by mem0's, found by memd's: entity and tags.
    const r = await add("eve", "Eve's kite is red", { agent_id: "kite-bot", run_id: "run-7", app_id: "toys" });
    const mine = await s.json("GET", `/v1/memory/${r.body.results[0].id}`);
    expect(mine.body).toMatchObject({
      namespace: "acme",
      entity: "eve",
      tags: ["agent:kite-bot", "run:run-7", "app:toys"],
    });
    const agentOnly = await mem0("POST", "/v1/memories/", { messages: "Bot note", agent_id: "kite-bot", infer: false });
    expect((await s.json("GET", `/v1/memory/${agentOnly.body.results[0].id}`)).body.entity).toBe("agent:kite-bot");
    const byTag = await s.json("GET", "/v1/memory?namespace=acme&tag=agent:kite-bot");
    expect(byTag.body.memories).toHaveLength(2);
  });

  test("memd's GET /v1/entities (no slash) is still memd's; /v1/entities/ is mem0's", async () => {
    const own = await s.json("GET", "/v1/entities?namespace=acme");
    expect(own.status).toBe(200);
    expect(own.body.entities.map((e: any) => e.entity)).toContain("ann");
    const bad = await s.json("GET", "/v1/entities");
    expect(bad.status).toBe(400);
    expect(bad.body.error.message).toContain("namespace");
    // A trailing slash on memd's own call (it names a namespace) still gets memd's answer.
    const slashed = await s.json("GET", "/v1/entities/?namespace=acme");
    expect(slashed.body.entities.map((e: any) => e.entity)).toContain("ann");
    const theirs = await mem0("GET", "/v1/entities/");
    expect(theirs.body.results.find((e: any) => e.name === "ann")).toMatchObject({ type: "user", total_memories: 2 });
  });

  test("errors in mem0's shape, with memd's message", async () => {
    const cases: [string, Awaited<ReturnType<typeof mem0>>, number, string][] = [
      [
        "unknown id",
        await mem0("GET", "/v1/memories/0190a5a4-0000-7000-8000-000000000000/"),
        404,
        "no memory with that id",
      ],
      [
        "no id to delete by",
        await mem0("DELETE", "/v1/memories/"),
        400,
        "one of user_id, agent_id, run_id or app_id is required",
      ],
      ["no id to add for", await mem0("POST", "/v1/memories/", { messages: "x", infer: false }), 400, "is required"],
      [
        "unknown filter",
        await mem0("POST", "/v3/memories/", { filters: { keywords: "x" } }),
        400,
        "memd supports user_id",
      ],
      ["bad body", await mem0("POST", "/v3/memories/search/", { query: 5 }), 400, "query"],
      ["user id with a reserved prefix", await add("agent:x", "y"), 400, "may not start with agent:"],
      ["messages too long", await add("ann", "x".repeat(70_000)), 400, "messages: is 70000 bytes of UTF-8"],
    ];
    for (const [name, r, status, words] of cases) {
      expect([name, r.status]).toEqual([name, status]);
      expect(r.body.detail).toContain(words);
      expect(typeof r.body.code).toBe("string");
    }
  });
});

describe("add with inference and no model (the built-in extractor)", () => {
  const memories = async (user: string) =>
    ((await mem0("GET", `/v1/memories/?user_id=${user}`)).body as any[]).map((m) => m.memory);

  test("a {role, content} list: the user's statements are kept, the assistant's small talk is not", async () => {
    const r = await mem0("POST", "/v1/memories/", {
      messages: [
        { role: "user", content: "Hi! I like hiking." },
        { role: "assistant", content: "Nice! Hiking is great exercise." },
        { role: "user", content: "Thanks" },
      ],
      user_id: "hiker",
    });
    expect(r.status).toBe(200);
    expect(r.body.results.map((m: any) => [m.memory, m.event])).toEqual([["I like hiking.", "ADD"]]);
    expect(await memories("hiker")).toEqual(["I like hiking."]);
  });

  test('"user: …" / "assistant: …" text: role prefixes dropped, acknowledgements not stored', async () => {
    const r = await mem0("POST", "/v1/memories/", {
      messages: "user: I prefer green tea.\nassistant: Got it! Green tea it is.\nuser: ok",
      user_id: "sipper",
    });
    expect(r.status).toBe(200);
    expect(r.body.results.map((m: any) => m.memory)).toEqual(["I prefer green tea."]);
    for (const greeting of ["Hi there", "Thanks", "ok", "Nice!"]) {
      const g = await mem0("POST", "/v3/memories/add/", {
        messages: [{ role: "user", content: greeting }],
        user_id: "sipper",
      });
      expect([greeting, g.status, g.body.results]).toEqual([greeting, 200, []]);
    }
    const again = await mem0("POST", "/v1/memories/", { messages: "user: i prefer green tea", user_id: "sipper" });
    expect(again.body.results.map((m: any) => [m.memory, m.event])).toEqual([["I prefer green tea.", "NONE"]]);
    expect(await memories("sipper")).toEqual(["I prefer green tea."]);
  });
});

describe("an ordinary memd change", () => {
  test("a mem0 add is in memd's event stream and diff, and mem0's routes are listed in their own group of memd's OpenAPI document", async () => {
    const since = new Date().toISOString();
    const sub = await subscribe(s.url, rootSecret, "namespace=acme&entity=jo");
    try {
      const r = await add("jo", "Jo collects stamps");
      await sub.until(1, 5000);
      expect(sub.events[0]!.event).toMatchObject({ event: "ADD", memoryId: r.body.results[0].id, actorKeyId: acme.id });
    } finally {
      sub.close();
    }
    const diff = await s.json("POST", "/v1/memory/diff", { namespace: "acme", entity: "jo", since });
    expect(diff.body.created.map((c: any) => c.content)).toEqual(["Jo collects stamps"]);
    const doc = (await (await fetch(`${s.url}/v1/openapi.json`)).json()) as {
      paths: Record<string, Record<string, { tags: string[] }>>;
    };
    expect(doc.paths["/v1/entities"]!.get!.tags).toEqual(["browse"]);
    const mem0Paths = Object.keys(doc.paths).filter((p) => p.includes("memories") || p.includes("ping"));
    expect(mem0Paths).toContain("/v3/memories/add/");
    for (const p of mem0Paths)
      for (const op of Object.values(doc.paths[p]!)) expect([p, op.tags]).toEqual([p, ["mem0"]]);
  });

  test("a filter of many ids (more than memd reads one by one) still finds exactly its memories", async () => {
    const many = Array.from({ length: 40 }, (_, i) => `many-${i}`);
    await add("many-7", "Many seven likes kites");
    await add("many-33", "Many thirty-three likes kites");
    const r = await mem0("POST", "/v3/memories/search/", { query: "kites", filters: { user_id: { in: many } } });
    expect(r.body.results.map((m: any) => m.user_id).sort()).toEqual(["many-33", "many-7"]);
    const list = await mem0("POST", "/v3/memories/", { filters: { OR: many.map((u) => ({ user_id: u })) } });
    expect(list.body.count).toBe(2);
  });
});

describe("fields beside the filters", () => {
  test("expiration_date becomes memd's ttl: the memory is read until the end of that day (UTC)", async () => {
    const day = new Date(Date.now() + 3 * 86_400_000).toISOString().slice(0, 10);
    const r = await add("ida", "Ida's coupon", { expiration_date: day });
    expect(r.body.results[0].expiration_date).toBe(day);
    const own = await s.json("GET", `/v1/memory/${r.body.results[0].id}`);
    expect(own.body.expiresAt).toStartWith(`${day}T23:59:5`);
    expect((await add("ida", "x", { expiration_date: "2001-01-01" })).body.detail).toContain("in the past");
  });

  test("mem0's timestamp (Unix seconds) becomes memd's observedAt, on add and on update", async () => {
    const said = Date.UTC(2025, 4, 17, 9, 30); // 2025-05-17T09:30:00Z
    const r = await add("jo", "Jo moved to Porto", { timestamp: said / 1000 });
    expect(r.status).toBe(200);
    const id = r.body.results[0].id;
    expect((await s.json("GET", `/v1/memory/${id}`)).body.observedAt).toBe("2025-05-17T09:30:00.000Z");
    const later = Date.UTC(2025, 6, 1);
    expect((await mem0("PUT", `/v1/memories/${id}/`, { timestamp: later / 1000 })).status).toBe(200);
    expect((await s.json("GET", `/v1/memory/${id}`)).body.observedAt).toBe("2025-07-01T00:00:00.000Z");
    // An ISO 8601 date is taken too; a date in the future or not a date is a 400 naming timestamp.
    const iso = await add("jo", "Jo likes port wine", { timestamp: "2024-12-24T18:00:00Z" });
    expect((await s.json("GET", `/v1/memory/${iso.body.results[0].id}`)).body.observedAt).toBe(
      "2024-12-24T18:00:00.000Z",
    );
    const future = await add("jo", "x", { timestamp: Date.now() / 1000 + 86_400 });
    expect([future.status, future.body.detail]).toEqual([400, expect.stringContaining("timestamp")]);
    expect((await add("jo", "x", { timestamp: "soon" })).status).toBe(400);
  });

  test("add takes the ids in filters (the Python client's AddMemoryOptions)", async () => {
    const r = await mem0("POST", "/v3/memories/add/", {
      messages: "Gil knits",
      filters: { user_id: "gil" },
      infer: false,
    });
    expect(r.body.results[0]).toMatchObject({ memory: "Gil knits", user_id: "gil" });
  });

  test("search narrows by top-level metadata and categories; keyword_search asks memd for keyword mode", async () => {
    await add("hal", "Hal hikes in the Alps", { metadata: { season: "summer" } });
    await add("hal", "Hal hikes in the snow", { metadata: { season: "winter" } });
    const r = await mem0("POST", "/v3/memories/search/", {
      query: "hikes",
      filters: { user_id: "hal" },
      metadata: { season: "winter" },
      categories: ["general"],
      keyword_search: true,
    });
    expect(r.body.results.map((m: any) => m.memory)).toEqual(["Hal hikes in the snow"]);
    const none = await mem0("POST", "/v3/memories/search/", {
      query: "hikes",
      filters: { user_id: "hal" },
      categories: ["work"],
    });
    expect(none.body.results).toEqual([]);
  });

  test("a query parameter memd would ignore is refused, so a delete never reaches wider than asked", async () => {
    const del = await mem0("DELETE", "/v1/memories/?user_id=hal&metadata=%7B%7D");
    expect(del.status).toBe(400);
    expect(del.body.detail).toContain("metadata: is not a parameter memd reads here");
    expect((await mem0("GET", "/v1/memories/?user_id=hal")).body).toHaveLength(2);
    const list = await mem0("GET", "/v1/memories/?user_id=hal&keywords=snow");
    expect(list.status).toBe(400);
    // mem0's account ids are accepted and ignored.
    expect((await mem0("GET", "/v1/memories/?user_id=hal&org_id=o&project_id=p")).status).toBe(200);
  });
});

describe("which namespace a mem0 call lands in", () => {
  test("a key of several namespaces names one with the header; without it and without the setting: 400 naming the ways", async () => {
    const root = { key: rootSecret };
    const none = await mem0("GET", "/v1/memories/?user_id=ann", undefined, root);
    expect(none.status).toBe(400);
    for (const way of ["X-Memd-Namespace", "exactly one namespace", "MEMD_MEM0_NAMESPACE"])
      expect(none.body.detail).toContain(way);
    const named = await mem0("GET", "/v1/memories/?user_id=ann", undefined, {
      ...root,
      headers: { "x-memd-namespace": "acme" },
    });
    expect(named.body).toHaveLength(2);
    // The header cannot reach outside the key's namespaces.
    const foreign = await mem0("GET", "/v1/memories/?user_id=ann", undefined, {
      headers: { "x-memd-namespace": "other" },
    });
    expect(foreign.status).toBe(403);
  });

  test("MEMD_MEM0_NAMESPACE places the calls of a key that covers it", async () => {
    const t = await startTestServer({ env: { MEMD_MEM0_NAMESPACE: "shared" } });
    try {
      const r = await fetch(`${t.url}/v1/memories/`, {
        method: "POST",
        headers: { authorization: `Token ${rootSecret}`, "content-type": "application/json" },
        body: JSON.stringify({ messages: "Fay sings", user_id: "fay", infer: false }),
      });
      expect(r.status).toBe(200);
      const own = await t.json("GET", "/v1/memory?namespace=shared&entity=fay");
      expect(own.body.memories.map((m: any) => m.content)).toEqual(["Fay sings"]);
    } finally {
      await t.stop();
    }
  });
});
