// Memory as tools an agent calls itself: OpenAI function-calling definitions of remember, recall,
// forget, what_changed and get_context, scoped to one namespace and entity, and a dispatcher that
// runs a tool call and gives the tool message's content. Works with any framework that takes
// OpenAI-style tools; the `ai` SDK adapter is `memdTools` in @memd/client/ai.
import { type MemdClient, MemdError } from "./client.js";

/** Where the tools read and write: the agent never chooses (or sees) another namespace or entity. */
export interface ToolScope {
  namespace: string;
  entity: string;
  /**
   * `remember` stores smartly (the server's model extracts and reconciles facts) unless false:
   * then the content is stored verbatim. Default: the server's default (smart).
   */
  infer?: boolean;
}

/** A JSON Schema object, as OpenAI's `parameters` take it. */
export type JsonSchema = { [key: string]: unknown };

/** One tool in OpenAI's function-calling format (`tools: [...]` of a chat-completions request). */
export interface OpenAITool {
  type: "function";
  function: { name: string; description: string; parameters: JsonSchema };
}

/** A tool call as a model sends it (`message.tool_calls[i]`), or just its name and arguments. */
export type ToolCall =
  | { id?: string; type?: "function"; function: { name: string; arguments: string | Record<string, unknown> } }
  | { name: string; arguments: string | Record<string, unknown> };

export const toolNames = ["remember", "recall", "forget", "what_changed", "get_context"] as const;
export type ToolName = (typeof toolNames)[number];

const string = (description: string, extra: JsonSchema = {}) => ({ type: "string", description, ...extra });

/** The tools' definitions: names, what each is for (written for the model), and their arguments. */
export const toolDefinitions: OpenAITool[] = [
  {
    type: "function",
    function: {
      name: "remember",
      description:
        "Save something worth remembering about the user for later conversations: a fact, a preference, a plan. One short statement per call.",
      parameters: {
        type: "object",
        properties: {
          content: string("What to remember, in one or two sentences", { minLength: 1 }),
          category: string("Optional kind of memory, e.g. preference, fact, plan"),
          tags: { type: "array", items: { type: "string" }, description: "Optional labels" },
        },
        required: ["content"],
        additionalProperties: false,
      },
    },
  },
  {
    type: "function",
    function: {
      name: "recall",
      description:
        "Search what is remembered about the user. Returns the best matching memories first, each with its id, content, category and date.",
      parameters: {
        type: "object",
        properties: {
          query: string("What to look for, in words", { minLength: 1 }),
          limit: { type: "integer", minimum: 1, maximum: 50, description: "How many memories at most (default 5)" },
          category: string("Only memories of this category"),
        },
        required: ["query"],
        additionalProperties: false,
      },
    },
  },
  {
    type: "function",
    function: {
      name: "forget",
      description: "Delete one memory that is wrong or that the user asked to forget, by the id that recall gave.",
      parameters: {
        type: "object",
        properties: { memoryId: string("The memory's id, from recall") },
        required: ["memoryId"],
        additionalProperties: false,
      },
    },
  },
  {
    type: "function",
    function: {
      name: "what_changed",
      description:
        "What was learned, corrected or forgotten about the user since a time: new, updated, replaced and deleted memories.",
      parameters: {
        type: "object",
        properties: {
          since: string("ISO 8601 time, e.g. 2026-01-31T12:00:00Z; absent: from the beginning"),
        },
        additionalProperties: false,
      },
    },
  },
  {
    type: "function",
    function: {
      name: "get_context",
      description:
        "Everything relevant that is remembered about the user, as text ready to read: call it before answering a question that may depend on the user's history.",
      parameters: {
        type: "object",
        properties: {
          query: string("What the conversation is about now (optional)"),
          maxTokens: { type: "integer", minimum: 50, maximum: 20000, description: "Budget in tokens (default 1000)" },
        },
        additionalProperties: false,
      },
    },
  },
];

/** A tool's answer for the model: what it did, or `{error: {code, message}}` when memd refused. */
export type ToolResult = Record<string, unknown>;

const pick = (args: Record<string, unknown>, ...keys: string[]) =>
  Object.fromEntries(keys.filter((k) => args[k] !== undefined && args[k] !== null).map((k) => [k, args[k]]));

const uuid = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const notFound = () => new MemdError(404, "not_found", "no memory with that id");

/** The error as the model sees it: memd's code and message (never a stack). */
const failure = (e: unknown): ToolResult => {
  if (e instanceof MemdError) return { error: { code: e.code, message: e.message } };
  throw e;
};

/**
 * Memory tools for one agent, scoped to `scope.namespace` and `scope.entity`:
 * `definitions` goes into the model request's `tools`; `run(toolCall)` runs one call and answers
 * the content of the `tool` message to send back. A refusal of memd (a 403, a 400 for bad
 * arguments, ...) is answered as `{"error": {code, message}}` for the model to read; a name that
 * is not one of these tools throws (check with `handles(name)` when the agent has other tools).
 */
export function memoryTools(client: MemdClient, scope: ToolScope) {
  const { namespace, entity } = scope;
  const execute: Record<ToolName, (args: Record<string, unknown>) => Promise<ToolResult>> = {
    async remember(args) {
      const infer = scope.infer === undefined ? {} : { infer: scope.infer };
      const res = await client.store({
        namespace,
        entity,
        content: String(args.content ?? ""),
        ...infer,
        ...pick(args, "tags"),
        // A category is the model's only for a raw store; a smart store's model picks its own.
        ...(scope.infer === false ? pick(args, "category") : {}),
      });
      return {
        stored: res.memories.map((m) => ({ id: m.id, content: m.content, category: m.category, event: m.event })),
        skipped: res.skipped,
      };
    },
    async recall(args) {
      const res = await client.search({
        namespace,
        entity,
        query: String(args.query ?? ""),
        limit: typeof args.limit === "number" ? args.limit : 5,
        ...pick(args, "category"),
      });
      return {
        memories: res.results.map((m) => ({
          id: m.id,
          content: m.content,
          category: m.category,
          score: m.score,
          createdAt: m.createdAt,
        })),
      };
    },
    async forget(args) {
      const id = typeof args.memoryId === "string" ? args.memoryId.trim() : "";
      if (!id) throw new MemdError(400, "invalid_arguments", "memoryId: the id of a memory, from recall, is required");
      // memd's ids are UUIDs: anything else names no memory (and never reaches another route).
      if (!uuid.test(id)) throw notFound();
      // Only this entity's memories: an id of another entity is as unknown as one that never was.
      const memory = await client.get(id);
      if (memory.namespace !== namespace || memory.entity !== entity) throw notFound();
      await client.delete(id);
      return { forgotten: { id, content: memory.content } };
    },
    async what_changed(args) {
      const res = await client.diff({ namespace, entity, ...pick(args, "since") });
      return {
        summary: res.summary,
        created: res.created,
        updated: res.updated,
        replaced: res.replaced,
        deleted: res.deleted,
        hasMore: res.hasMore,
        nextSince: res.nextSince,
      };
    },
    async get_context(args) {
      const res = await client.context({ namespace, entity, ...pick(args, "query", "maxTokens") });
      return { context: res.context, tokens: res.tokens, truncated: res.truncated };
    },
  };
  const guarded = Object.fromEntries(
    Object.entries(execute).map(([name, fn]) => [name, (args: Record<string, unknown>) => fn(args).catch(failure)]),
  ) as typeof execute;

  const handles = (name: string): name is ToolName => (toolNames as readonly string[]).includes(name);
  return {
    /** The tools in OpenAI's format, for a request's `tools`. */
    definitions: toolDefinitions,
    /** Whether `name` is one of these tools (an agent may have others). */
    handles,
    /** Each tool as a function of its parsed arguments, answering the result object. */
    execute: guarded,
    /** Runs a tool call and answers the tool message's content: JSON text. */
    async run(call: ToolCall): Promise<string> {
      const fn = "function" in call ? call.function : call;
      if (!handles(fn.name)) throw new Error(`memd tools: no tool named ${fn.name}`);
      let args: Record<string, unknown>;
      try {
        args = typeof fn.arguments === "string" ? JSON.parse(fn.arguments || "{}") : (fn.arguments ?? {});
        if (typeof args !== "object" || args === null || Array.isArray(args)) throw new Error("not an object");
      } catch (e) {
        return JSON.stringify({
          error: { code: "invalid_arguments", message: `arguments are not a JSON object: ${(e as Error).message}` },
        });
      }
      return JSON.stringify(await guarded[fn.name](args));
    },
  };
}

export type MemoryTools = ReturnType<typeof memoryTools>;
