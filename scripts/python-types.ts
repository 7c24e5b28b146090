// Writes clients/python/memd/types.py: TypedDicts of the API for the Python client, generated
// from the server's own OpenAPI document (GET /v1/openapi.json of a throwaway server started
// from this source), so the Python types cannot drift from what the server validates and answers.
// `bun run scripts/python-types.ts` writes it; `--check` fails if the file is out of date
// (`make build` runs it that way, beside scripts/client-types.ts for the TypeScript client).
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadConfig } from "../src/config/config";
import { startServer } from "../src/server";

// biome-ignore lint/suspicious/noExplicitAny: an OpenAPI schema of any shape, read field by field
type Schema = Record<string, any>;
type Operation = {
  parameters?: { name: string; in: string; required?: boolean; schema: Schema; description?: string }[];
  requestBody?: { content?: Record<string, { schema: Schema }> };
  responses?: Record<string, { content?: Record<string, { schema: Schema }> }>;
};
export type OpenApi = { paths: Record<string, Record<string, Operation>> };

/**
 * The named types, in the order they are written: [name, method, path, part]. Part is `body`
 * (the request body), `query` (the query parameters), a status (the JSON answer) or `status[]`
 * (the items of an answer that is an array). Nested objects equal to a named type use its name;
 * others are named after their place (parent name + field name).
 */
const NAMED: [string, string, string, string][] = [
  ["ErrorBody", "post", "/v1/memory", "default"],
  ["Memory", "get", "/v1/memory/{id}", "200"],
  ["StoreRequest", "post", "/v1/memory", "body"],
  ["StoreResponse", "post", "/v1/memory", "200"],
  ["ListQuery", "get", "/v1/memory", "query"],
  ["ListResponse", "get", "/v1/memory", "200"],
  ["PatchRequest", "patch", "/v1/memory/{id}", "body"],
  ["DeleteEntityQuery", "delete", "/v1/memory", "query"],
  ["EraseRequest", "post", "/v1/memory/erase", "body"],
  ["Erasure", "post", "/v1/memory/erase", "200"],
  ["ErasuresQuery", "get", "/v1/memory/erasures", "query"],
  ["SearchRequest", "post", "/v1/memory/search", "body"],
  ["SearchResponse", "post", "/v1/memory/search", "200"],
  ["ContextRequest", "post", "/v1/memory/context", "body"],
  ["ContextResponse", "post", "/v1/memory/context", "200"],
  ["DiffRequest", "post", "/v1/memory/diff", "body"],
  ["DiffResponse", "post", "/v1/memory/diff", "200"],
  ["EventsQuery", "get", "/v1/memory/events", "query"],
  ["AuditEvent", "get", "/v1/memory/events", "200[]"],
  ["StreamQuery", "get", "/v1/memory/events/stream", "query"],
  ["NamespacesQuery", "get", "/v1/namespaces", "query"],
  ["NamespacesResponse", "get", "/v1/namespaces", "200"],
  ["EntitiesQuery", "get", "/v1/entities", "query"],
  ["EntitiesResponse", "get", "/v1/entities", "200"],
  ["ApiKey", "get", "/v1/me", "200"],
  ["CreateKeyRequest", "post", "/v1/keys", "body"],
  ["CreatedKey", "post", "/v1/keys", "201"],
  ["ExportQuery", "get", "/v1/export", "query"],
  ["RevertRequest", "post", "/v1/memory/{id}/revert", "body"],
  ["RevertResponse", "post", "/v1/memory/{id}/revert", "200"],
  ["RestoreRequest", "post", "/v1/memory/restore", "body"],
  ["RestoreResponse", "post", "/v1/memory/restore", "200"],
  ["ConsolidateRequest", "post", "/v1/memory/consolidate", "body"],
  ["ConsolidateResponse", "post", "/v1/memory/consolidate", "200"],
  ["CreateWebhook", "post", "/v1/webhooks", "body"],
  ["CreatedWebhook", "post", "/v1/webhooks", "201"],
  ["Webhook", "get", "/v1/webhooks/{id}", "200"],
  ["PatchWebhook", "patch", "/v1/webhooks/{id}", "body"],
  ["Delivery", "get", "/v1/webhooks/{id}/deliveries", "200[]"],
];

/** Names for nested objects nicer than their place's. */
const RENAME: Record<string, string> = {
  ErrorBodyErrorDetailsItem: "ErrorDetail",
  SearchResponseResultsItem: "SearchResult",
  DiffResponseCreatedItem: "DiffCreated",
  DiffResponseUpdatedItem: "DiffUpdated",
  DiffResponseDeletedItem: "DiffDeleted",
  DiffResponseReplacedItem: "DiffReplaced",
  NamespacesResponseNamespacesItem: "NamespaceSummary",
  EntitiesResponseEntitiesItem: "EntitySummary",
  RestoreResponseMemoriesItem: "RestoredMemory",
  ConsolidateResponseGroupsItem: "ConsolidatedGroup",
};

/** Parts that an older or newer server may not have (the context endpoint): left out when absent. */
const OPTIONAL = new Set(["ContextRequest", "ContextResponse"]);

const KEYWORDS = new Set(
  "False None True and as assert async await break class continue def del elif else except finally for from global if import in is lambda nonlocal not or pass raise return try while with yield".split(
    " ",
  ),
);

const pascal = (s: string) => s.replace(/(^|[^A-Za-z0-9]+)([A-Za-z0-9])/g, (_, __, c: string) => c.toUpperCase());

/** A query parameter whose pattern takes only digits is a whole number to a caller. */
const numericPattern = (s: Schema) =>
  s.type === "string" && typeof s.pattern === "string" && /^\^\[[01]-9\]/.test(s.pattern);

function part(doc: OpenApi, method: string, path: string, which: string): Schema | undefined {
  const op = doc.paths[path]?.[method];
  if (!op) return undefined;
  if (which === "body") return op.requestBody?.content?.["application/json"]?.schema;
  if (which === "query") {
    const params = (op.parameters ?? []).filter((p) => p.in === "query");
    if (params.length === 0) return undefined;
    const properties: Schema = {};
    for (const p of params)
      properties[p.name] = {
        ...(numericPattern(p.schema) ? { type: "integer" } : p.schema),
        description: p.description ?? p.schema.description,
      };
    return {
      type: "object",
      properties,
      required: params.filter((p) => p.required).map((p) => p.name),
    };
  }
  const array = which.endsWith("[]");
  const schema = op.responses?.[which.replace("[]", "")]?.content?.["application/json"]?.schema;
  return array ? schema?.items : schema;
}

/** A schema without its documentation, so that equal shapes compare equal. */
const shape = (s: unknown): string =>
  JSON.stringify(s, (k, v) => (k === "description" || k === "default" ? undefined : v));

export function generate(doc: OpenApi): string {
  const byShape = new Map<string, string>();
  const classes: string[] = [];
  const taken = new Set<string>();

  function typeOf(s: Schema, context: string): string {
    if (s.type === "object" && s.properties) {
      const known = byShape.get(shape(s));
      if (known) return known;
      return emit(RENAME[context] ?? context, s);
    }
    if (s.const !== undefined) return `Literal[${JSON.stringify(s.const)}]`;
    if (Array.isArray(s.enum)) return `Literal[${s.enum.map((v: unknown) => JSON.stringify(v)).join(", ")}]`;
    if (Array.isArray(s.anyOf) || Array.isArray(s.oneOf)) {
      // Elysia's numeric query and answer fields also accept a numeric string; answers hold numbers.
      const members = ((s.anyOf ?? s.oneOf) as Schema[]).filter(
        (x) => !(x.type === "string" && /^(integer|numeric)$/.test(x.format ?? "")),
      );
      const consts = members.every((m) => m.const !== undefined);
      if (consts) return `Literal[${members.map((m) => JSON.stringify(m.const)).join(", ")}]`;
      return [...new Set(members.map((m, i) => typeOf(m, `${context}${i}`)))].join(" | ");
    }
    if (Array.isArray(s.type))
      return [...new Set(s.type.map((t: string) => typeOf({ ...s, type: t }, context)))].join(" | ");
    switch (s.type) {
      case "string":
        return "str";
      case "integer":
        return "int";
      case "number":
        return "float";
      case "boolean":
        return "bool";
      case "null":
        return "None";
      case "array":
        return `list[${s.items ? typeOf(s.items, `${context}Item`) : "Any"}]`;
      case "object":
        return "dict[str, Any]";
      default:
        return "Any";
    }
  }

  function field(name: string, s: Schema, parent: string): string {
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name) || KEYWORDS.has(name))
      throw new Error(`python-types: field ${parent}.${name} is not a Python name`);
    const doc = s.description ? `    #: ${s.description}\n` : "";
    return `${doc}    ${name}: ${typeOf(s, parent + pascal(name))}`;
  }

  function emit(name: string, s: Schema): string {
    if (taken.has(name)) throw new Error(`python-types: two types named ${name}`);
    taken.add(name);
    byShape.set(shape(s), name);
    const required = new Set<string>(s.required ?? []);
    const entries = Object.entries(s.properties as Record<string, Schema>);
    const must = entries.filter(([k]) => required.has(k)).map(([k, v]) => field(k, v, name));
    const may = entries.filter(([k]) => !required.has(k)).map(([k, v]) => field(k, v, name));
    const doc = s.description ? `    """${s.description}"""\n\n` : "";
    let text: string;
    if (may.length === 0) text = `class ${name}(TypedDict):\n${doc}${must.join("\n") || "    pass"}\n`;
    else if (must.length === 0) text = `class ${name}(TypedDict, total=False):\n${doc}${may.join("\n")}\n`;
    else
      text =
        `class _${name}Required(TypedDict):\n${must.join("\n")}\n\n\n` +
        `class ${name}(_${name}Required, total=False):\n${doc}${may.join("\n")}\n`;
    classes.push(text);
    return name;
  }

  for (const [name, method, path, which] of NAMED) {
    const s = part(doc, method, path, which);
    if (!s) {
      if (OPTIONAL.has(name)) continue;
      throw new Error(`python-types: ${method.toUpperCase()} ${path} has no ${which}`);
    }
    if (s.type !== "object" || !s.properties) throw new Error(`python-types: ${name} is not an object schema`);
    if (byShape.has(shape(s))) classes.push(`${name} = ${byShape.get(shape(s))}\n`);
    else emit(name, s);
  }

  return [
    "# Generated by scripts/python-types.ts from the server's GET /v1/openapi.json. Do not edit:",
    "# run `bun run scripts/python-types.ts` (make build checks that this file is current).",
    "# Keys are the API's JSON names (camelCase), as they travel.",
    "from __future__ import annotations",
    "",
    "from typing import Any, Literal, TypedDict",
    "",
    "",
    classes.join("\n\n"),
  ].join("\n");
}

/** The OpenAPI document of a throwaway server started from this source (temp data dir, port 0). */
export async function fetchSpec(): Promise<OpenApi> {
  const dir = mkdtempSync(join(tmpdir(), "memd-python-types-"));
  const config = loadConfig(["--host", "127.0.0.1", "--port", "0", "--data-dir", dir, "--log-level", "error"], {
    MEMD_API_KEY: `memd_types_${crypto.randomUUID().replaceAll("-", "")}`,
  });
  const server = await startServer(
    config,
    () => {},
    () => {},
  );
  try {
    const res = await fetch(`${server.url}/v1/openapi.json`);
    if (!res.ok) throw new Error(`GET /v1/openapi.json answered ${res.status}`);
    return (await res.json()) as OpenApi;
  } finally {
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

const out = join(import.meta.dir, "..", "clients", "python", "memd", "types.py");
if (import.meta.main) {
  const text = generate(await fetchSpec());
  if (process.argv.includes("--check")) {
    let current = "";
    try {
      current = readFileSync(out, "utf8");
    } catch {}
    if (current !== text) {
      console.error(`${out} is out of date: run bun run scripts/python-types.ts`);
      process.exit(1);
    }
  } else writeFileSync(out, text);
}
