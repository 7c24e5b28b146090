/**
 * The MCP tools. Each one is a thin translation to memd's own REST API, sent through a
 * fetch-like function: real `fetch` to a running memd (`memd mcp --url`), or the in-process
 * app's `handle` (`memd mcp --data-dir`, and `POST /mcp` with the caller's own key). So
 * permissions, namespace scopes, validation and errors are exactly the REST API's, and the tools
 * never touch storage themselves.
 *
 * Input schemas are built from the REST routes' TypeBox schemas; a tool's schema is plain JSON
 * Schema, which is what MCP wants.
 */
import { type TObject, type TSchema, Type } from "@sinclair/typebox";
import { Value } from "@sinclair/typebox/value";
import { DiffRequest, EventsQuery } from "../audit/model";
import { ConsolidateRequest } from "../consolidate/model";
import { ContextRequest } from "../context/model";
import { detailsInWords } from "../http/validation-words";
import { ListQuery, StoreRequest } from "../memory/model";
import { RevertRequest } from "../revert/model";
import { SearchRequest } from "../search/model";
import { Uuid } from "../wire/schemas";

/** What sends one request to memd's REST API: `fetch`, or an Elysia app's `handle`. */
export type Fetch = (request: Request) => Promise<Response>;

/** Defaults that let an agent's calls leave out namespace and entity. */
export interface ToolDefaults {
  namespace?: string;
  entity?: string;
}

/** How the tools reach memd. */
export interface ToolEnv {
  fetch: Fetch;
  /**
   * Base URL the REST paths are appended to, e.g. http://127.0.0.1:8420, or https://host/memd
   * behind a proxy (any origin for app.handle).
   */
  baseUrl: string;
  /** The Authorization header value sent with every call ("Bearer memd_…"), if any. */
  authorization?: string;
  /** Extra headers for every call, e.g. the x-request-id of the MCP request that caused it. */
  headers?: Record<string, string>;
  defaults?: ToolDefaults;
}

/** An error as memd's REST API reports it: `{"error": {code, message, details?}}`. */
export class ToolError extends Error {
  constructor(
    readonly code: string,
    message: string,
    readonly details?: { field: string; message: string }[],
  ) {
    super(message);
  }
}

/** A small REST client over a ToolEnv: answers the parsed JSON body, or throws ToolError. */
export function restClient(env: ToolEnv) {
  return async function rest(
    method: "GET" | "POST" | "DELETE",
    path: string,
    input: { query?: Record<string, string | number | string[] | undefined>; body?: unknown } = {},
  ): Promise<unknown> {
    // Appended, not resolved: a base URL with a path (https://host/memd) keeps it.
    const url = new URL(env.baseUrl.replace(/\/+$/, "") + path);
    for (const [k, v] of Object.entries(input.query ?? {}))
      for (const one of Array.isArray(v) ? v : v === undefined ? [] : [v]) url.searchParams.append(k, String(one));
    const headers: Record<string, string> = { accept: "application/json", ...env.headers };
    if (env.authorization) headers.authorization = env.authorization;
    if (input.body !== undefined) headers["content-type"] = "application/json";
    let res: Response;
    try {
      res = await env.fetch(
        new Request(url.href, {
          method,
          headers,
          body: input.body === undefined ? undefined : JSON.stringify(input.body),
        }),
      );
    } catch (e) {
      throw new ToolError("unreachable", `could not reach memd at ${env.baseUrl}: ${(e as Error).message}`);
    }
    const text = await res.text();
    let body: unknown;
    try {
      body = text ? JSON.parse(text) : undefined;
    } catch {
      throw new ToolError("bad_answer", `memd answered ${res.status} with a body that is not JSON`);
    }
    if (!res.ok) {
      const error = (body as { error?: { code?: unknown; message?: unknown; details?: unknown } } | undefined)?.error;
      throw new ToolError(
        typeof error?.code === "string" ? error.code : `http_${res.status}`,
        typeof error?.message === "string" ? error.message : `memd answered ${res.status}`,
        Array.isArray(error?.details) ? (error.details as { field: string; message: string }[]) : undefined,
      );
    }
    return body;
  };
}

export type Rest = ReturnType<typeof restClient>;

/** One MCP tool: its schema (built from the defaults in force) and what it does. */
export interface ToolDef {
  name: string;
  title: string;
  description: string;
  readOnly: boolean;
  /** Keys of ToolDefaults this tool fills in when the call leaves them out. */
  defaulted: (keyof ToolDefaults)[];
  input: TObject;
  run(args: Record<string, unknown>, rest: Rest): Promise<unknown>;
}

const described = <T extends TSchema>(schema: T, description: string): T => ({ ...schema, description });
/** REST list endpoints take limit as query text; a tool takes a number and sends it as text. */
const Limit = (max: number, def: number) =>
  Type.Integer({ minimum: 1, maximum: max, description: `at most this many; 1 to ${max}, default ${def}` });

const nsText = "the namespace: a tenant, app or agent that owns the memories (e.g. acme)";
const entityText = "who or what the memories are about (e.g. user-42)";
const store = StoreRequest.properties;

/** `remember` takes exactly the store body of POST /v1/memory. */
const RememberInput = Type.Object(
  {
    ...store,
    namespace: described(store.namespace, nsText),
    entity: described(store.entity, entityText),
    content: described(
      store.content,
      "what to remember, in plain words; may hold several facts (at most 64 KiB of UTF-8 by default)",
    ),
    infer: Type.Optional(
      described(
        store.infer,
        "true (default): extract facts and reconcile them with what is known; false: store content verbatim",
      ),
    ),
    tags: Type.Optional(described(store.tags, 'labels to find the memories by later, e.g. ["drinks"]')),
    metadata: Type.Optional(described(store.metadata, "any JSON object kept with each memory, at most 16 KiB")),
    source: Type.Optional(described(store.source, "where this came from, e.g. chat or email")),
    ttl: Type.Optional(described(store.ttl, "seconds until the memory expires")),
    category: Type.Optional(
      described(store.category, "raw stores (infer false) only: e.g. preference; default general"),
    ),
    importance: Type.Optional(described(store.importance, "raw stores (infer false) only: 0 to 1; default 0.5")),
    observedAt: Type.Optional(
      described(
        store.observedAt,
        "when the content was said or observed, ISO 8601 (e.g. 2025-05-01T09:30:00Z), for older conversations; default: now",
      ),
    ),
  },
  { additionalProperties: false },
);

const asOfText =
  "ISO 8601 time, e.g. 2026-03-01T00:00:00Z: answer with the memories exactly as memd knew them then (not in the future)";
const AsOfArg = Type.String({ maxLength: 64, description: asOfText });

/** `recall`'s input is the body of `POST /v1/memory/search`, its fields described for a model. */
export const RecallInput = Type.Object(
  {
    namespace: described(SearchRequest.properties.namespace, nsText),
    entity: Type.Optional(described(SearchRequest.properties.entity, `${entityText}; absent: the whole namespace`)),
    query: described(SearchRequest.properties.query, "what you want to know, in plain words"),
    limit: Type.Optional(Limit(100, 10)),
    mode: Type.Optional(SearchRequest.properties.mode),
    category: Type.Optional(described(SearchRequest.properties.category, "only memories of this category")),
    tags: Type.Optional(described(SearchRequest.properties.tags, "only memories carrying all of these tags")),
    as_of: Type.Optional(described(AsOfArg, `${asOfText}; needs entity; keyword search only`)),
  },
  { additionalProperties: false },
);

/** `get_context`'s input is the body of `POST /v1/memory/context`, its fields described for a model. */
const ContextInput = Type.Object(
  {
    namespace: described(ContextRequest.properties.namespace, nsText),
    entity: described(ContextRequest.properties.entity, entityText),
    query: Type.Optional(
      described(
        ContextRequest.properties.query,
        "what the conversation is about now, in plain words; absent: the most important and most recent memories",
      ),
    ),
    maxTokens: Type.Optional(ContextRequest.properties.maxTokens),
    categories: Type.Optional(ContextRequest.properties.categories),
  },
  { additionalProperties: false },
);

const ListInput = Type.Object(
  {
    namespace: described(ListQuery.properties.namespace, nsText),
    entity: Type.Optional(described(ListQuery.properties.entity, `${entityText}; absent: the whole namespace`)),
    limit: Type.Optional(Limit(1000, 100)),
    category: Type.Optional(described(ListQuery.properties.category, "only memories of this category")),
    tags: Type.Optional(described(ListQuery.properties.tag, "only memories carrying all of these tags")),
    cursor: Type.Optional(
      described(ListQuery.properties.cursor, "for the next page: the previous answer's nextCursor (null: no more)"),
    ),
    as_of: Type.Optional(AsOfArg),
  },
  { additionalProperties: false },
);

const ForgetInput = Type.Object(
  { id: described(Uuid, "the id of the memory to delete, as remember or recall gave it") },
  { additionalProperties: false },
);

const ChangesInput = Type.Object(
  {
    namespace: described(DiffRequest.properties.namespace, nsText),
    entity: Type.Optional(described(DiffRequest.properties.entity, `${entityText}; absent: the whole namespace`)),
    since: Type.Optional(
      described(
        DiffRequest.properties.since,
        "ISO 8601 time, e.g. 2026-01-31T12:00:00Z; changes strictly after it. Absent: from the beginning. To page, send the previous answer's nextSince",
      ),
    ),
    limit: Type.Optional(DiffRequest.properties.limit),
  },
  { additionalProperties: false },
);

const RevertInput = Type.Object(
  {
    memoryId: described(Uuid, "the id of the memory to take back, as history or recall gave it"),
    toEvent: described(
      RevertRequest.properties.toEvent,
      "the id of one of its events (from history): the memory becomes what it was right after that event; to undo a change, give the event before it",
    ),
    dryRun: Type.Optional(described(Type.Boolean(), "true: only say what would change")),
  },
  { additionalProperties: false },
);

const ConsolidateInput = Type.Object(
  {
    namespace: described(ConsolidateRequest.properties.namespace, nsText),
    entity: described(ConsolidateRequest.properties.entity, entityText),
    dryRun: Type.Optional(described(Type.Boolean(), "true: only show the groups that would be merged")),
  },
  { additionalProperties: false },
);

const HistoryInput = Type.Object(
  {
    memoryId: Type.Optional(
      described(EventsQuery.properties.memoryId, "one memory's id: its whole history (takes precedence)"),
    ),
    namespace: Type.Optional(described(EventsQuery.properties.namespace, nsText)),
    entity: Type.Optional(described(EventsQuery.properties.entity, entityText)),
    limit: Type.Optional(Limit(1000, 100)),
  },
  { additionalProperties: false },
);

/** The tools, in the order a client lists them. */
export const tools: ToolDef[] = [
  {
    name: "remember",
    title: "Remember",
    description:
      "Store something worth remembering about an entity (a user, customer or project) in a namespace. " +
      "By default memd extracts the facts from `content` and reconciles them with what it already knows: " +
      "exact or near duplicates are skipped, contradicted facts are replaced, and every change is recorded in an audit trail. " +
      "Send short, self-contained statements (e.g. 'Prefers tea over coffee'); set infer to false to store the text verbatim as one memory. " +
      "Answers the memories created or changed (each with its id and event ADD, MERGE or REPLACE) and counts of skipped duplicates and conflicts.",
    readOnly: false,
    defaulted: ["namespace", "entity"],
    input: RememberInput,
    run: (args, rest) => rest("POST", "/v1/memory", { body: args }),
  },
  {
    name: "recall",
    title: "Recall",
    description:
      "Find what memd knows that is relevant to a question or topic, before answering or acting. " +
      "Give the namespace, usually the entity, and a `query` in plain words; answers the best-matching current memories, " +
      "most relevant first, each with its id, content, category, tags, creation time and a relevance score. " +
      "Use it at the start of a conversation or task, and whenever the user refers to something they said before. " +
      "With as_of (and an entity), it searches the memories as they were at that time.",
    readOnly: true,
    defaulted: ["namespace", "entity"],
    input: RecallInput,
    run: ({ as_of, ...args }, rest) =>
      rest("POST", "/v1/memory/search", { body: as_of === undefined ? args : { ...args, asOf: as_of } }),
  },
  {
    name: "get_context",
    title: "Get context",
    description:
      "Get what memd knows about an entity as one block of text ready to put in your prompt, within a token budget (maxTokens, default 1000). " +
      "Give the namespace, the entity and, if you have one, a `query` saying what the conversation is about: the best-matching memories come first; " +
      "without a query, the most important and most recent ones. Lines are grouped by category, each with its date. " +
      "Answers context (the text), memories (those used, with ids and scores), tokens and truncated (true when more did not fit). Call it before you answer.",
    readOnly: true,
    defaulted: ["namespace", "entity"],
    input: ContextInput,
    run: (args, rest) => rest("POST", "/v1/memory/context", { body: args }),
  },
  {
    name: "list_memories",
    title: "List memories",
    description:
      "List the current memories of an entity (or of a whole namespace when entity is left out), newest first, " +
      "each with its id, content, category, importance, tags and creation time. Expired, deleted and replaced memories are not shown. " +
      "Use it to review everything known about an entity; use recall to find what is relevant to a question. " +
      "While the answer's nextCursor is not null there are more: call again with cursor set to it. " +
      "With as_of, it lists the memories exactly as memd knew them at that time.",
    readOnly: true,
    defaulted: ["namespace", "entity"],
    input: ListInput,
    run: ({ tags, as_of, ...args }, rest) =>
      rest("GET", "/v1/memory", {
        query: {
          ...(args as Record<string, string | number | undefined>),
          tag: tags as string[] | undefined,
          asOf: as_of as string | undefined,
        },
      }),
  },
  {
    name: "forget",
    title: "Forget",
    description:
      "Delete one memory by its id, for example when the user asks you to forget something or a memory is plainly wrong. " +
      "The memory leaves every read at once; the deletion is recorded in the audit trail (event DELETE, reason deleted). " +
      "To correct a fact instead, remember the new fact: memd replaces the contradicted one itself.",
    readOnly: false,
    defaulted: [],
    input: ForgetInput,
    run: (args, rest) => rest("DELETE", `/v1/memory/${encodeURIComponent(args.id as string)}`),
  },
  {
    name: "changes",
    title: "Changes since",
    description:
      "What changed in the memories of a namespace or entity since a time: memories created, updated, deleted and replaced " +
      "(old and new content side by side), with a one-line summary. Use it to catch up after a break, e.g. with the time you last looked. " +
      "While the answer's hasMore is true, call again with since set to its nextSince.",
    readOnly: true,
    defaulted: ["namespace", "entity"],
    input: ChangesInput,
    run: (args, rest) => rest("POST", "/v1/memory/diff", { body: args }),
  },
  {
    name: "history",
    title: "History",
    description:
      "The audit trail, newest first: every event (ADD, MERGE, REPLACE, UPDATE, DELETE, SKIP_DUPLICATE, KEEP_EXISTING) with the old and new content, " +
      "the reason and the time. Give memoryId for the whole story of one memory (including the memory that replaced it), " +
      "or namespace and entity for everything that happened to an entity. Use it to explain why memd holds what it holds.",
    readOnly: true,
    defaulted: ["namespace", "entity"],
    input: HistoryInput,
    run: (args, rest) =>
      rest("GET", "/v1/memory/events", {
        query: args as Record<string, string | number | undefined>,
      }).then((events) => ({ events })),
  },
  {
    name: "revert",
    title: "Revert a change",
    description:
      "Take back a change to one memory: give its memoryId and toEvent, the id of one of its events (from history), and the memory becomes exactly what it was right after that event " +
      "(content, category, importance, tags, metadata, expiry, observed time); a deleted memory comes back with the same id. To undo one change, give the event just before it. " +
      "The revert is itself recorded (an ADD, UPDATE or DELETE event carrying revertOf), so it can be taken back too. Erased content cannot come back. dryRun: true only says what would change.",
    readOnly: false,
    defaulted: [],
    input: RevertInput,
    run: ({ memoryId, ...body }, rest) =>
      rest("POST", `/v1/memory/${encodeURIComponent(memoryId as string)}/revert`, { body }),
  },
  {
    name: "consolidate",
    title: "Consolidate",
    description:
      "Merge the near-duplicate memories of an entity into one each, losing nothing: every merged memory is named in the kept one's MERGE event and deleted with a DELETE naming where it went, " +
      "so restoring the entity to the moment before undoes it. Only memories that clearly state the same fact are merged (never ones that differ in a number, a date, a negation or a name). " +
      "Try dryRun: true first to see the groups.",
    readOnly: false,
    defaulted: ["namespace", "entity"],
    input: ConsolidateInput,
    run: (args, rest) => rest("POST", "/v1/memory/consolidate", { body: args }),
  },
];

/** A tool's input schema with the defaulted fields made optional, for tools/list. */
export function inputSchemaOf(tool: ToolDef, defaults: ToolDefaults = {}): TObject {
  const properties: Record<string, TSchema> = {};
  const required = new Set(tool.input.required ?? []);
  for (const [k, s] of Object.entries(tool.input.properties)) {
    const d = tool.defaulted.includes(k as keyof ToolDefaults) ? defaults[k as keyof ToolDefaults] : undefined;
    if (d === undefined) properties[k] = s;
    else {
      // With a default in force, leaving the entity out means that entity, not the whole namespace.
      const text = (s.description ?? k).replace("; absent: the whole namespace", "");
      properties[k] = { ...s, description: `${text}; default: ${d}` };
      required.delete(k);
    }
  }
  return { ...tool.input, properties, required: [...required] } as TObject;
}

/**
 * Checks a call's arguments against the tool's schema, fills in the defaults, and runs it.
 * Throws ToolError for bad input and for every error memd answers.
 */
export async function runTool(tool: ToolDef, rawArgs: unknown, env: ToolEnv): Promise<unknown> {
  const schema = inputSchemaOf(tool, env.defaults);
  const args = { ...((rawArgs ?? {}) as Record<string, unknown>) };
  if (!Value.Check(schema, args)) {
    // In words, one per field, as the REST API answers a bad body.
    const details = detailsInWords(Value.Errors(schema, args));
    throw new ToolError(
      "invalid_request",
      `invalid request: ${details.map((d) => `${d.field}: ${d.message}`).join("; ")}`,
      details,
    );
  }
  // One memory's history is found by its id alone: an entity default must not narrow it.
  const skipDefaults = tool.name === "history" && args.memoryId !== undefined;
  if (!skipDefaults)
    for (const k of tool.defaulted)
      if (args[k] === undefined && env.defaults?.[k] !== undefined) args[k] = env.defaults[k];
  return tool.run(args, restClient(env));
}
