// @targets lmdb postgres binary
/**
 * The official mem0 TypeScript client (npm `mem0ai`, MemoryClient) against a real memd, host
 * changed and nothing else: every method memd answers, and the errors the client turns into its
 * own types. Its telemetry is off by its documented switch, MEM0_TELEMETRY=false, read when the
 * module loads (hence the import after setting it).
 */
import { afterAll, beforeAll, beforeEach, describe, expect, test } from "bun:test";
import { type FakeModel, startFakeModel } from "../fake-model";
import { startTestServer, type TestServer } from "../helpers";

process.env.MEM0_TELEMETRY = "false";
const { MemoryClient, AuthenticationError, MemoryNotFoundError, ValidationError } = await import("mem0ai");
type Client = InstanceType<typeof MemoryClient>;

const fake: FakeModel = startFakeModel();
let s: TestServer;
let rw: { id: string; secret: string };
let ro: { id: string; secret: string };
let client: Client;

/** One user message, the list the TypeScript client takes. */
const say = (content: string) => [{ role: "user" as const, content }];
const answer = (...operations: object[]) => JSON.stringify({ operations });

async function createKey(body: Record<string, unknown>) {
  const r = await s.json("POST", "/v1/keys", body);
  expect(r.status).toBe(201);
  return r.body as { id: string; secret: string };
}

/** A client whose errors stay quiet: a failed start-up ping is logged by the client itself. */
const clientFor = (apiKey: string) => new MemoryClient({ apiKey, host: s.url });

/** memd's own view of an entity of namespace acme, oldest first. */
const memdList = async (entity: string) =>
  ((await s.json("GET", `/v1/memory?namespace=acme&entity=${entity}`)).body.memories as any[]).reverse();
const memdEvents = async (memoryId: string) =>
  (await s.json("GET", `/v1/memory/events?memoryId=${memoryId}`)).body as any[];

beforeAll(async () => {
  s = await startTestServer({
    env: { MEMD_LLM_BASE_URL: fake.url, MEMD_LLM_MODEL: "tiny", MEMD_LLM_API_KEY: "k", MEMD_LLM_TIMEOUT_MS: "5000" },
  });
  // A key scoped to exactly one namespace: mem0 calls land there without any other setting.
  rw = await createKey({ name: "mem0-rw", permission: "read_write", namespaces: ["acme"] });
  ro = await createKey({ name: "mem0-ro", permission: "read", namespaces: ["acme"] });
  client = clientFor(rw.secret);
});
afterAll(async () => {
  await s.stop();
  await fake.stop();
});
beforeEach(() => fake.reset());

describe("the mem0 TypeScript client against memd", () => {
  test("ping: the client's start-up check passes", async () => {
    await client.ping();
  });

  test("add with infer false stores each message verbatim, in memd's entity, with the key as actor", async () => {
    const r: any = await client.add(
      [
        { role: "user", content: "I drink green tea every morning" },
        { role: "assistant", content: "Noted, green tea it is" },
      ],
      { userId: "alice", infer: false, metadata: { channel: "chat" } },
    );
    expect(r.results.map((m: any) => [m.memory, m.event, m.userId])).toEqual([
      ["I drink green tea every morning", "ADD", "alice"],
      ["Noted, green tea it is", "ADD", "alice"],
    ]);
    expect(r.results[0].metadata).toEqual({ channel: "chat" });
    expect(fake.calls).toBe(0);
    // The same memories through memd's own API, each an ADD by this key.
    const mine = await memdList("alice");
    expect(mine.map((m) => m.content)).toEqual(["I drink green tea every morning", "Noted, green tea it is"]);
    const [event] = await memdEvents(r.results[0].id);
    expect(event).toMatchObject({ event: "ADD", actorKeyId: rw.id, namespace: "acme", entity: "alice" });
  });

  test("add with inference: memd's smart store over the conversation; ADD, then UPDATE for a replaced fact", async () => {
    fake.script([answer({ fact: "Lives in Paris", decision: "ADD", category: "personal" })]);
    const first: any = await client.add(
      [
        { role: "user", content: "I live in Paris" },
        { role: "assistant", content: "Lovely city" },
      ],
      { userId: "bea" },
    );
    expect(first.results).toHaveLength(1);
    expect(first.results[0]).toMatchObject({ memory: "Lives in Paris", event: "ADD", userId: "bea" });
    expect(first.results[0].categories).toEqual(["personal"]);
    // The model saw both turns, each with its role.
    expect(JSON.stringify(fake.requests[0]!.messages)).toContain("user: I live in Paris\\nassistant: Lovely city");

    fake.script([
      (req) => {
        const text = String(req.messages.find((m) => m.role === "user")?.content);
        const handle = /(m\d+) \[[^\]]*\] Lives in Paris/.exec(text)![1];
        return answer({ fact: "Lives in Berlin", decision: "REPLACE", target: handle });
      },
    ]);
    const second: any = await client.add(say("I left Paris, I live in Berlin now"), { userId: "bea" });
    expect(second.results).toHaveLength(1);
    expect(second.results[0]).toMatchObject({ memory: "Lives in Berlin", event: "UPDATE" });
    expect((await memdList("bea")).map((m) => m.content)).toEqual(["Lives in Berlin"]);
  });

  test("add with inference answers DELETE for a memory the model deleted, NONE for a duplicate it kept", async () => {
    const [kept] = ((await client.add(say("Works at Acme"), { userId: "hank", infer: false })) as any).results;
    fake.script([
      (req) => {
        const text = String(req.messages.find((m) => m.role === "user")?.content);
        const handle = /(m\d+) \[[^\]]*\] Works at Acme/.exec(text)![1];
        return answer({ fact: "Quit Acme", decision: "DELETE", target: handle, reason: "quit" });
      },
    ]);
    const quit: any = await client.add(say("I quit my job at Acme"), { userId: "hank" });
    expect(quit.results.map((m: any) => [m.id, m.memory, m.event, m.userId])).toEqual([
      [kept.id, "Works at Acme", "DELETE", "hank"],
    ]);
    expect(await memdList("hank")).toEqual([]);

    const [olives] = ((await client.add(say("Hates olives"), { userId: "hank", infer: false })) as any).results;
    const calls = fake.calls;
    // An exact duplicate is settled without the model: the memory it repeats, unchanged.
    const again: any = await client.add(say("Hates olives"), { userId: "hank" });
    expect(fake.calls).toBe(calls);
    expect(again.results.map((m: any) => [m.id, m.memory, m.event])).toEqual([[olives.id, "Hates olives", "NONE"]]);
    expect((await memdList("hank")).map((m) => m.content)).toEqual(["Hates olives"]);
  });

  test("search with filters: scores, only the filtered entity, agent and run ids as filters", async () => {
    await client.add(say("Carl plays the cello"), { userId: "carl", infer: false });
    await client.add(say("Carl likes cello concerts"), {
      userId: "carl",
      agentId: "music-bot",
      runId: "r1",
      infer: false,
    });
    await client.add(say("Dana plays the cello too"), { userId: "dana", infer: false });

    const byUser: any = await client.search("cello", { filters: { user_id: "carl" } });
    expect(byUser.results.map((m: any) => m.memory).sort()).toEqual([
      "Carl likes cello concerts",
      "Carl plays the cello",
    ]);
    for (const m of byUser.results) expect(typeof m.score).toBe("number");

    const byAgent: any = await client.search("cello", { filters: { agent_id: "music-bot" } });
    expect(byAgent.results.map((m: any) => [m.memory, m.userId, m.agentId, m.runId])).toEqual([
      ["Carl likes cello concerts", "carl", "music-bot", "r1"],
    ]);

    const both: any = await client.search("cello", {
      filters: { AND: [{ user_id: "carl" }, { run_id: "r1" }] },
      topK: 5,
    });
    expect(both.results.map((m: any) => m.memory)).toEqual(["Carl likes cello concerts"]);

    const top1: any = await client.search("cello", {
      filters: { OR: [{ user_id: "carl" }, { user_id: "dana" }] },
      topK: 1,
    });
    expect(top1.results).toHaveLength(1);
  });

  test("get all, a page at a time: count, next and previous, every memory once", async () => {
    for (let i = 1; i <= 5; i++) await client.add(say(`Erin fact ${i}`), { userId: "erin", infer: false });
    const seen: string[] = [];
    for (let page = 1; ; page++) {
      const r: any = await client.getAll({ filters: { user_id: "erin" }, page, pageSize: 2 });
      expect(r.count).toBe(5);
      expect(r.previous === null).toBe(page === 1);
      seen.push(...r.results.map((m: any) => m.memory));
      if (r.next === null) break;
      expect(page).toBeLessThan(3);
    }
    // Newest first, as memd lists them; each once.
    expect(seen).toEqual(["Erin fact 5", "Erin fact 4", "Erin fact 3", "Erin fact 2", "Erin fact 1"]);
  });

  test("get, update, history, delete of one memory", async () => {
    const added: any = await client.add(say("Finn prefers window seats"), { userId: "finn", infer: false });
    const id = added.results[0].id;

    const got: any = await client.get(id);
    expect(got).toMatchObject({ id, memory: "Finn prefers window seats", userId: "finn", agentId: null });

    const updated: any = await client.update(id, { text: "Finn prefers aisle seats", metadata: { fixed: true } });
    expect(updated).toMatchObject({ id, memory: "Finn prefers aisle seats", metadata: { fixed: true } });
    // memd's own record and audit trail: an UPDATE by this key.
    expect((await s.json("GET", `/v1/memory/${id}`)).body.content).toBe("Finn prefers aisle seats");

    const history: any[] = await client.history(id);
    expect(history.map((h) => [h.event, h.oldMemory, h.newMemory])).toEqual([
      ["ADD", null, "Finn prefers window seats"],
      ["UPDATE", "Finn prefers window seats", "Finn prefers aisle seats"],
    ]);
    expect(history.every((h) => h.memoryId === id && h.actorKeyId === rw.id)).toBe(true);

    const deleted = await client.delete(id);
    expect(deleted.message).toMatch(/deleted/i);
    const gone = await client.get(id).catch((e) => e);
    expect(gone).toBeInstanceOf(MemoryNotFoundError);
    expect(gone.message).toContain("no memory with that id");
    // The history still tells the whole story, the deletion last.
    expect((await client.history(id)).map((h: any) => h.event)).toEqual(["ADD", "UPDATE", "DELETE"]);
  });

  test("delete all of a user, and the users list with counts", async () => {
    await client.add(say("Gus likes chess"), { userId: "gus", infer: false });
    await client.add(say("Gus likes go"), { userId: "gus", infer: false });
    await client.add(say("The helper bot is terse"), { agentId: "helper", infer: false });

    const users: any = await client.users();
    const byName = new Map(users.results.map((u: any) => [`${u.type}:${u.name}`, u.totalMemories]));
    expect(byName.get("user:gus")).toBe(2);
    expect(byName.get("agent:helper")).toBe(1);
    expect(users.count).toBe(users.results.length);

    const r = await client.deleteAll({ userId: "gus" });
    expect(r.message).toMatch(/deleted/i);
    expect(await memdList("gus")).toEqual([]);
    const after: any = await client.getAll({ filters: { user_id: "gus" } });
    expect(after.count).toBe(0);

    // deleteUsers goes through DELETE /v2/entities/agent/helper/.
    await client.deleteUsers({ agentId: "helper" });
    expect((await client.getAll({ filters: { agent_id: "helper" } })).count).toBe(0);
  });

  test("errors: a bad key, a read key writing, a foreign namespace: the client's own error types, memd's words", async () => {
    const bad = clientFor("memd_not_a_real_key");
    const e1 = await bad.getAll({ filters: { user_id: "alice" } }).catch((e) => e);
    expect(e1).toBeInstanceOf(AuthenticationError);
    expect(e1.errorCode).toBe("HTTP_401");
    expect(e1.message).toContain("unknown");

    const reader = clientFor(ro.secret);
    expect((await reader.getAll({ filters: { user_id: "alice" } })).count).toBe(2);
    const e2 = await reader.add(say("Reading only"), { userId: "alice", infer: false }).catch((e) => e);
    expect(e2).toBeInstanceOf(AuthenticationError);
    expect(e2.errorCode).toBe("HTTP_403");
    expect(e2.message).toContain("lacks the read_write permission");

    const foreign = clientFor(rw.secret);
    foreign.headers["X-Memd-Namespace"] = "someone-else";
    const e3 = await foreign.add(say("Elsewhere"), { userId: "alice", infer: false }).catch((e) => e);
    expect(e3).toBeInstanceOf(AuthenticationError);
    expect(e3.message).toContain("does not cover namespace");
    expect(e3.message).toContain("someone-else");

    const e4 = await client.search("tea", { filters: { mood: "happy" } as any }).catch((e) => e);
    expect(e4).toBeInstanceOf(ValidationError);
    expect(e4.message).toContain("is not a filter memd knows");
  });
});
