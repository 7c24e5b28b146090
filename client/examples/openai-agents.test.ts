// client/examples/openai-agents.test.ts
// Memory as tools of the OpenAI Agents SDK: an Agent whose model calls remember and recall in a
// run(). Here the model is the repository's fake OpenAI-compatible server, scripted to call the
// tools; in production it is OpenAI (or any chat-completions endpoint), and nothing else changes.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { memdAgentTools } from "@memd/client/openai-agents";
import { type Memd, startMemd } from "@memd/client/testkit";
import { Agent, OpenAIChatCompletionsModel, run, setTracingDisabled } from "@openai/agents";
import OpenAI from "openai";
import { type FakeModel, startFakeModel } from "../../test/fake-model";

let memd: Memd;
let fake: FakeModel;
beforeAll(async () => {
  setTracingDisabled(true); // traces would go to OpenAI's servers
  memd = await startMemd();
  fake = startFakeModel();
});
afterAll(async () => {
  await fake.stop();
  await memd.stop();
});

test("the agent keeps what it learns", async () => {
  fake.script([
    { toolCalls: [{ name: "remember", arguments: { content: "Works night shifts" } }] },
    { toolCalls: [{ name: "recall", arguments: { query: "shifts" } }] },
    "Noted: you work night shifts.",
  ]);
  const openai = new OpenAI({ baseURL: fake.url, apiKey: "unused" });
  const agent = new Agent({
    name: "assistant",
    instructions: "Remember what the user tells you about themselves.",
    model: new OpenAIChatCompletionsModel(openai, "any"),
    tools: memdAgentTools(memd.client, { namespace: "demo", entity: "user-7", infer: false }),
  });

  const result = await run(agent, "I work night shifts, remember that.");

  expect(result.finalOutput).toBe("Noted: you work night shifts.");
  const { memories } = await memd.client.list({ namespace: "demo", entity: "user-7" });
  expect(memories.map((m) => m.content)).toEqual(["Works night shifts"]);
  // The model got recall's result as a tool message, and the five tools in every request.
  expect(JSON.stringify(fake.requests[2].messages.at(-1))).toContain("Works night shifts");
  const offered = (fake.requests[0].tools as { function: { name: string } }[]).map((t) => t.function.name);
  expect(offered).toEqual(["remember", "recall", "forget", "what_changed", "get_context"]);
});

test("a refusal of memd reaches the model as an error object, and the run goes on", async () => {
  fake.script([{ toolCalls: [{ name: "forget", arguments: { memoryId: "not-an-id" } }] }, "Nothing to forget."]);
  const agent = new Agent({
    name: "assistant",
    model: new OpenAIChatCompletionsModel(new OpenAI({ baseURL: fake.url, apiKey: "unused" }), "any"),
    tools: memdAgentTools(memd.client, { namespace: "demo", entity: "user-7" }),
  });
  const before = fake.requests.length;
  const result = await run(agent, "Forget that.");
  expect(result.finalOutput).toBe("Nothing to forget.");
  const toolMessage = JSON.stringify(fake.requests[before + 1].messages.at(-1));
  expect(toolMessage).toContain("not_found");
});
