import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import {
  CallToolRequestSchema,
  type CallToolResult,
  ListToolsRequestSchema,
  type Tool,
} from "@modelcontextprotocol/sdk/types.js";
import { version } from "../build-info";
import { inputSchemaOf, runTool, type ToolEnv, ToolError, tools } from "./tools";

const instructions =
  "memd keeps facts about entities (users, customers, projects) grouped in namespaces, with an audit trail. " +
  "Call recall before answering questions that may depend on what you were told before; call remember for facts worth keeping " +
  "(preferences, decisions, personal details the user shares); use changes to catch up since a time.";

/** The tools/list entries: JSON Schemas straight from TypeBox (which are JSON Schema already). */
export function listTools(env: Pick<ToolEnv, "defaults">): Tool[] {
  return tools.map((tool) => ({
    name: tool.name,
    title: tool.title,
    description: tool.description,
    inputSchema: JSON.parse(JSON.stringify(inputSchemaOf(tool, env.defaults))),
    annotations: {
      title: tool.title,
      readOnlyHint: tool.readOnly,
      // forget removes a memory; remember may replace one (both are recorded and visible in history).
      destructiveHint: !tool.readOnly,
      idempotentHint: tool.readOnly,
      openWorldHint: false,
    },
  }));
}

/** Runs one tool call; memd's errors become a tool result with isError, never a protocol error. */
export async function callTool(name: string, args: unknown, env: ToolEnv): Promise<CallToolResult> {
  const tool = tools.find((t) => t.name === name);
  try {
    if (!tool)
      throw new ToolError("not_found", `no tool named ${name}; the tools are ${tools.map((t) => t.name).join(", ")}`);
    const result = await runTool(tool, args, env);
    const isObject = typeof result === "object" && result !== null && !Array.isArray(result);
    return {
      content: [{ type: "text", text: JSON.stringify(result) }],
      ...(isObject ? { structuredContent: result as Record<string, unknown> } : {}),
    };
  } catch (e) {
    if (!(e instanceof ToolError)) throw e;
    const error = { code: e.code, message: e.message, ...(e.details ? { details: e.details } : {}) };
    return {
      isError: true,
      content: [{ type: "text", text: `${e.code}: ${e.message}` }],
      structuredContent: { error },
    };
  }
}

/**
 * An MCP server (not yet connected to a transport) whose tools call memd's REST API through
 * `env`. One per stdio process, or one per HTTP request in stateless mode.
 */
export function createMcpServer(env: ToolEnv): Server {
  const server = new Server({ name: "memd", title: "memd", version }, { capabilities: { tools: {} }, instructions });
  server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: listTools(env) }));
  server.setRequestHandler(CallToolRequestSchema, (request) =>
    callTool(request.params.name, request.params.arguments ?? {}, env),
  );
  return server;
}
