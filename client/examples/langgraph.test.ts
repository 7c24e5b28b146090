// client/examples/langgraph.test.ts
// LangGraph's long-term memory in memd: a graph compiled with a MemdStore, whose agent node lets the
// model save and search memories through the store (config.store). Here the model is the
// repository's fake OpenAI-compatible server, scripted to call the tools; in production it is your
// provider's model. Every put is a keyed fact in memd, with its audit event.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { Annotation, END, type LangGraphRunnableConfig, START, StateGraph } from "@langchain/langgraph";
import { MemdStore } from "@memd/client/langgraph";
import { type Memd, startMemd } from "@memd/client/testkit";
import OpenAI from "openai";
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

const tools: OpenAI.ChatCompletionTool[] = [
  {
    type: "function",
    function: {
      name: "save_memory",
      description: "Save a fact about the user under a short key",
      parameters: { type: "object", properties: { key: { type: "string" }, fact: { type: "string" } } },
    },
  },
  {
    type: "function",
    function: {
      name: "search_memories",
      description: "Search what is known about the user",
      parameters: { type: "object", properties: { query: { type: "string" } } },
    },
  },
];

const State = Annotation.Root({ input: Annotation<string>, reply: Annotation<string> });

/** One agent turn: the model calls tools until it answers; the tools use the graph's store. */
function agentNode(model: OpenAI) {
  return async (state: typeof State.State, config: LangGraphRunnableConfig) => {
    const store = config.store!;
    const memories = ["memories", config.configurable?.userId as string];
    const messages: OpenAI.ChatCompletionMessageParam[] = [{ role: "user", content: state.input }];
    for (;;) {
      const { choices } = await model.chat.completions.create({ model: "any", messages, tools });
      const message = choices[0].message;
      if (!message.tool_calls?.length) return { reply: message.content ?? "" };
      messages.push(message);
      for (const call of message.tool_calls) {
        if (call.type !== "function") continue;
        const args = JSON.parse(call.function.arguments);
        let result: unknown;
        if (call.function.name === "save_memory") {
          await store.put(memories, args.key, { fact: args.fact });
          result = { saved: args.key };
        } else result = (await store.search(memories, { query: args.query })).map((i) => i.value.fact);
        messages.push({ role: "tool", tool_call_id: call.id, content: JSON.stringify(result) });
      }
    }
  };
}

test("an agent graph keeps its memories in memd", async () => {
  fake.script([
    { toolCalls: [{ name: "save_memory", arguments: { key: "drink", fact: "Prefers green tea" } }] },
    "Noted.",
    { toolCalls: [{ name: "save_memory", arguments: { key: "drink", fact: "Prefers coffee now" } }] },
    "Noted.",
    { toolCalls: [{ name: "search_memories", arguments: { query: "coffee" } }] },
    "You prefer coffee.",
  ]);
  const model = new OpenAI({ baseURL: fake.url, apiKey: "unused" });
  const store = new MemdStore(memd.client, { namespace: "agent" });
  const graph = new StateGraph(State)
    .addNode("agent", agentNode(model))
    .addEdge(START, "agent")
    .addEdge("agent", END)
    .compile({ store });
  const config = { configurable: { userId: "user-1" } };

  await graph.invoke({ input: "I like green tea." }, config);
  await graph.invoke({ input: "Actually, coffee these days." }, config);
  const { reply } = await graph.invoke({ input: "What do I drink?" }, config);

  expect(reply).toBe("You prefer coffee.");
  // The search's answer went back to the model.
  expect(JSON.stringify(fake.requests[5].messages.at(-1))).toContain("Prefers coffee now");
  // In memd: one memory for the key, updated in place, with both changes in its history.
  const item = await store.get(["memories", "user-1"], "drink");
  expect(item?.value).toEqual({ fact: "Prefers coffee now" });
  const memory = await memd.client.getByKey({ namespace: "agent", entity: "memories.user-1", key: "drink" });
  const events = await memd.client.events({ memoryId: memory!.id });
  expect(events.map((e) => e.event)).toEqual(["UPDATE", "ADD"]);
});
