// client/examples/agent-tools.test.ts
// Memory as tools of the ai SDK: a generateText loop in which the model calls remember and
// recall. Here the model is the repository's fake OpenAI-compatible server, scripted to call the
// tools; in production it is your provider's model, and nothing else changes.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { memdTools } from "@memd/client/ai";
import { type Memd, startMemd } from "@memd/client/testkit";
import { generateText, stepCountIs } from "ai";
import { type FakeModel, startFakeModel } from "../../test/fake-model";

let memd: Memd;
let fake: FakeModel;
beforeAll(async () => {
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
  const model = createOpenAICompatible({ name: "fake", baseURL: fake.url }).chatModel("any");

  const { text } = await generateText({
    model,
    tools: memdTools(memd.client, { namespace: "demo", entity: "user-7", infer: false }),
    stopWhen: stepCountIs(5),
    prompt: "I work night shifts, remember that.",
  });

  expect(text).toBe("Noted: you work night shifts.");
  const { memories } = await memd.client.list({ namespace: "demo", entity: "user-7" });
  expect(memories.map((m) => m.content)).toEqual(["Works night shifts"]);
  // The model got recall's result as a tool message.
  expect(JSON.stringify(fake.requests[2].messages.at(-1))).toContain("Works night shifts");
});
