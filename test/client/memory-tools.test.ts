// @targets lmdb binary
// Memory as tools (client/src/tools.ts, client/src/ai.ts): a real generateText loop of the ai SDK
// against the fake OpenAI-compatible model, scripted to call the tools; the memory really changes
// in a real memd, and the model receives the results. Also the plain OpenAI-format dispatcher.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { generateText, stepCountIs } from "ai";
import { memdTools } from "../../client/src/ai";
import { createClient, type MemdClient, memoryTools, type ToolCall, toolDefinitions } from "../../client/src/index";
import { type FakeModel, startFakeModel } from "../fake-model";
import { rootSecret, startTestServer, type TestServer } from "../helpers";

let server: TestServer;
let fake: FakeModel;
let client: MemdClient;
beforeAll(async () => {
  server = await startTestServer();
  fake = startFakeModel();
  client = createClient({ url: server.url, key: rootSecret });
});
afterAll(async () => {
  await fake.stop();
  await server.stop();
});

/** The tool messages of a chat-completions request, parsed. */
const toolMessages = (i: number) =>
  fake.requests[i].messages
    .filter((m) => m.role === "tool")
    .map((m) => JSON.parse(typeof m.content === "string" ? m.content : JSON.stringify(m.content)));

describe("the ai SDK adapter in a generateText loop", () => {
  test("remember, recall, then an answer: the memory changes and the model reads the results", async () => {
    fake.reset();
    fake.script([
      { toolCalls: [{ name: "remember", arguments: { content: "Favourite colour is teal", category: "preference" } }] },
      { toolCalls: [{ name: "recall", arguments: { query: "colour" } }] },
      "Your favourite colour is teal.",
    ]);
    const model = createOpenAICompatible({ name: "fake", baseURL: fake.url, apiKey: "k" }).chatModel("agent");
    const tools = memdTools(client, { namespace: "agents", entity: "ada", infer: false });
    const result = await generateText({
      model,
      tools,
      stopWhen: stepCountIs(5),
      prompt: "My favourite colour is teal. What is it?",
    });
    expect(result.text).toBe("Your favourite colour is teal.");
    expect(fake.calls).toBe(3);

    // The model was offered the five tools, with their schemas.
    const offered = (fake.requests[0].tools as { function: { name: string } }[]).map((t) => t.function.name);
    expect(offered.sort()).toEqual(["forget", "get_context", "recall", "remember", "what_changed"]);

    // memd really holds the memory, in the scope given (the model never named one).
    const stored = await client.list({ namespace: "agents", entity: "ada" });
    expect(stored.memories.map((m) => [m.content, m.category])).toEqual([["Favourite colour is teal", "preference"]]);

    // The model received each tool's result.
    const [remembered] = toolMessages(1);
    expect(remembered).toMatchObject({ stored: [{ id: stored.memories[0].id, content: "Favourite colour is teal" }] });
    const recalled = toolMessages(2);
    expect(recalled[1].memories.map((m: { id: string }) => m.id)).toEqual([stored.memories[0].id]);
  });

  test("forget, what_changed and get_context; a foreign id and a refusal come back as errors", async () => {
    fake.reset();
    const mine = (await client.store({ namespace: "agents", entity: "bob", content: "Lives in Oslo", infer: false }))
      .memories[0];
    const other = (await client.store({ namespace: "agents", entity: "eve", content: "Eve's secret", infer: false }))
      .memories[0];
    fake.script([
      {
        toolCalls: [
          { name: "get_context", arguments: { query: "Oslo" } },
          { name: "forget", arguments: { memoryId: other.id } },
        ],
      },
      { toolCalls: [{ name: "forget", arguments: { memoryId: mine.id } }] },
      // Since Bob's memory was made: its deletion shows (one created and deleted in the window would not).
      { toolCalls: [{ name: "what_changed", arguments: { since: mine.createdAt } }] },
      "Done.",
    ]);
    const model = createOpenAICompatible({ name: "fake", baseURL: fake.url, apiKey: "k" }).chatModel("agent");
    const result = await generateText({
      model,
      tools: memdTools(client, { namespace: "agents", entity: "bob" }),
      stopWhen: stepCountIs(6),
      prompt: "Forget where I live.",
    });
    expect(result.text).toBe("Done.");
    const [context, foreign] = toolMessages(1);
    expect(context.context).toContain("Lives in Oslo");
    expect(context.tokens).toBeGreaterThan(0);
    expect(foreign).toEqual({ error: { code: "not_found", message: "no memory with that id" } });
    expect(toolMessages(2)[2]).toEqual({ forgotten: { id: mine.id, content: "Lives in Oslo" } });
    const changed = toolMessages(3)[3];
    expect(changed.summary).toBe("0 new, 0 updated, 0 replaced");
    expect(changed.deleted.map((d: { id: string }) => d.id)).toEqual([mine.id]);
    // Eve's memory is untouched; Bob's is gone.
    expect((await client.get(other.id)).content).toBe("Eve's secret");
    expect((await client.get(mine.id).catch((e) => e)).status).toBe(404);
  });
});

describe("the OpenAI-format dispatcher, in a loop of plain fetch calls", () => {
  test("runs each tool call and answers the tool message content", async () => {
    fake.reset();
    fake.script([
      {
        toolCalls: [
          { name: "remember", arguments: { content: "Allergic to peanuts" } },
          { name: "recall", arguments: "not json" },
        ],
      },
      "Noted.",
    ]);
    const reader = await client.keys.create({ name: "ro", permission: "read", namespaces: ["agents"] });
    const tools = memoryTools(client, { namespace: "agents", entity: "cy", infer: false });
    const readOnly = memoryTools(createClient({ url: server.url, key: reader.secret }), {
      namespace: "agents",
      entity: "cy",
    });
    const messages: Record<string, unknown>[] = [{ role: "user", content: "I am allergic to peanuts." }];
    for (let step = 0; step < 4; step++) {
      const res = await fetch(`${fake.url}/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: "agent", messages, tools: tools.definitions }),
      });
      type Message = Record<string, unknown> & { tool_calls?: (ToolCall & { id: string })[] };
      const message = ((await res.json()) as { choices: { message: Message }[] }).choices[0].message;
      messages.push(message);
      if (!message.tool_calls) break;
      for (const call of message.tool_calls)
        messages.push({ role: "tool", tool_call_id: call.id, content: await tools.run(call) });
    }
    expect(messages.at(-1)).toMatchObject({ role: "assistant", content: "Noted." });
    const results = messages.filter((m) => m.role === "tool").map((m) => JSON.parse(m.content as string));
    expect(results[0].stored[0].content).toBe("Allergic to peanuts");
    expect(results[1].error.code).toBe("invalid_arguments");
    expect((await client.list({ namespace: "agents", entity: "cy" })).memories.map((m) => m.content)).toEqual([
      "Allergic to peanuts",
    ]);
    expect(fake.requests[1].messages.filter((m) => m.role === "tool")).toHaveLength(2);

    // A read-only key's remember is refused in words the model can read; reads work.
    expect(JSON.parse(await readOnly.run({ name: "remember", arguments: { content: "x" } })).error.code).toBe(
      "forbidden",
    );
    const recalled = JSON.parse(await readOnly.run({ name: "recall", arguments: { query: "peanuts" } }));
    expect(recalled.memories.map((m: { content: string }) => m.content)).toEqual(["Allergic to peanuts"]);
    expect(tools.handles("recall")).toBe(true);
    expect(tools.handles("weather")).toBe(false);
    await expect(tools.run({ name: "weather", arguments: {} })).rejects.toThrow("no tool named weather");
    expect(toolDefinitions.every((t) => t.type === "function" && t.function.parameters.type === "object")).toBe(true);
  });

  test("forget without a memory's id is the model's mistake, never another route's answer", async () => {
    const tools = memoryTools(client, { namespace: "agents", entity: "fay", infer: false });
    await tools.run({ name: "remember", arguments: { content: "Owns a kayak" } });
    const forget = async (args: Record<string, unknown>) =>
      JSON.parse(await tools.run({ name: "forget", arguments: args })).error;
    for (const args of [{}, { memoryId: "" }, { memoryId: "  " }, { memoryId: 42 }])
      expect(await forget(args)).toEqual({
        code: "invalid_arguments",
        message: "memoryId: the id of a memory, from recall, is required",
      });
    for (const memoryId of ["..", ".", "not-an-id", "../keys"])
      expect(await forget({ memoryId })).toEqual({ code: "not_found", message: "no memory with that id" });
    expect((await client.list({ namespace: "agents", entity: "fay" })).memories.map((m) => m.content)).toEqual([
      "Owns a kayak",
    ]);
  });

  test("docs/agents.md's tools section shows client/examples/agent-tools.test.ts as it is, and marks its other ts blocks no-run", () => {
    const repo = join(import.meta.dir, "../..");
    const whole = readFileSync(join(repo, "docs/agents.md"), "utf8");
    const start = whole.indexOf("\n## Memory as tools: function calling\n");
    expect(start).toBeGreaterThan(0);
    const next = whole.indexOf("\n## ", start + 1);
    const page = whole.slice(start, next === -1 ? undefined : next);
    const blocks = [...page.matchAll(/(<!-- no-run:[^>]*-->\n)?```ts\n([\s\S]*?)```/g)];
    expect(blocks.length).toBeGreaterThan(1);
    for (const [, noRun, code] of blocks) {
      const shown = /^\/\/ (client\/examples\/\S+)\n/.exec(code)?.[1];
      if (shown) expect(code).toBe(readFileSync(join(repo, shown), "utf8"));
      else expect(noRun).toBeDefined();
    }
  });

  test("the Python client offers the very same tool definitions", () => {
    const py = Bun.spawnSync(
      ["/usr/bin/python3", "-c", "import json, memd.tools; print(json.dumps(memd.tools.TOOL_DEFINITIONS))"],
      { env: { PATH: "/usr/bin:/bin", PYTHONPATH: join(import.meta.dir, "../../clients/python") }, stderr: "pipe" },
    );
    if (py.exitCode !== 0) throw new Error(py.stderr.toString());
    expect(JSON.parse(py.stdout.toString())).toEqual(toolDefinitions);
  });
});
