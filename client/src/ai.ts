// @memd/client/ai: memory as tools of the `ai` SDK (Vercel AI SDK), for generateText/streamText
// and agents. `ai` is an optional peer dependency: only this entry point imports it.
//
//   const tools = memdTools(client, { namespace: "acme", entity: "user-1" });
//   await generateText({ model, tools, stopWhen: stepCountIs(5), prompt: "..." });
import { jsonSchema, type Tool, tool } from "ai";
import type { MemdClient } from "./client.js";
import { memoryTools, type ToolName, type ToolResult, type ToolScope, toolDefinitions } from "./tools.js";

/**
 * The memory tools (remember, recall, forget, what_changed, get_context) as the `ai` SDK's
 * `tool()`s, scoped to one namespace and entity. Each tool's result is an object (memd's refusals
 * as `{error: {code, message}}`), which the SDK sends back to the model.
 */
export function memdTools(
  client: MemdClient,
  scope: ToolScope,
): Record<ToolName, Tool<Record<string, unknown>, ToolResult>> {
  const tools = memoryTools(client, scope);
  return Object.fromEntries(
    toolDefinitions.map(({ function: f }) => [
      f.name,
      tool({
        description: f.description,
        inputSchema: jsonSchema<Record<string, unknown>>(f.parameters),
        execute: (input: Record<string, unknown>) => tools.execute[f.name as ToolName](input),
      }),
    ]),
  ) as Record<ToolName, Tool<Record<string, unknown>, ToolResult>>;
}

export type { ToolName, ToolResult, ToolScope } from "./tools.js";
