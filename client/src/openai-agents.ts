// @memd/client/openai-agents: memory as tools of the OpenAI Agents SDK (@openai/agents), for an
// `Agent`'s `tools`. `@openai/agents` is an optional peer dependency: only this entry point imports it.
//
//   const agent = new Agent({ name: "helper", instructions: "...", tools: memdAgentTools(client, scope) });
//   await run(agent, "I work night shifts, remember that.");
import { type FunctionTool, tool } from "@openai/agents";
import type { MemdClient } from "./client.js";
import { memoryTools, type ToolName, type ToolResult, type ToolScope, toolDefinitions } from "./tools.js";

/**
 * The memory tools (remember, recall, forget, what_changed, get_context) as Agents SDK `tool()`s,
 * scoped to one namespace and entity. Each answers an object (memd's refusals as
 * `{error: {code, message}}`), which the SDK sends back to the model as the tool's output. The
 * schemas have optional arguments, so the tools are not strict (`strict: false`).
 */
export function memdAgentTools(client: MemdClient, scope: ToolScope): FunctionTool<unknown, never, ToolResult>[] {
  const tools = memoryTools(client, scope);
  return toolDefinitions.map(({ function: f }) =>
    tool({
      name: f.name,
      description: f.description,
      // biome-ignore lint/suspicious/noExplicitAny: the SDK types a non-strict JSON schema loosely
      parameters: f.parameters as any,
      strict: false,
      execute: (input: unknown) => tools.execute[f.name as ToolName](asArgs(input)),
    }),
  ) as unknown as FunctionTool<unknown, never, ToolResult>[];
}

/** The SDK hands a non-strict tool its arguments parsed from the model's JSON text. */
const asArgs = (input: unknown): Record<string, unknown> =>
  typeof input === "object" && input !== null && !Array.isArray(input) ? (input as Record<string, unknown>) : {};

export type { ToolName, ToolResult, ToolScope } from "./tools.js";
