import { toOpenAPISchema } from "@elysiajs/openapi";
import { Elysia } from "elysia";
// biome-ignore format: the import attribute embeds the file as text, in the binary too
import scalarScript from "../../node_modules/@scalar/api-reference/dist/browser/standalone.js" with { type: "text" };
import { version } from "../build-info";
import { errorAnswer } from "../wire/schemas";

const specPath = "/v1/openapi.json";

type Route = { method: string; path: string; hooks?: { body?: unknown } };
type Operation = {
  requestBody?: { content?: Record<string, unknown> };
  responses?: Record<string, unknown>;
  tags?: string[];
  summary?: string;
  description?: string;
};
type Doc = {
  paths: Record<string, Record<string, Operation>>;
  components: { schemas?: Record<string, unknown> };
  tags?: { name: string; description: string }[];
};

/** The groups of /docs' sidebar, in its order, with what each holds. */
const groups: { name: string; description: string }[] = [
  { name: "memory", description: "Store, read, edit and delete memories." },
  { name: "search", description: "Find memories by words and by meaning; the context for a prompt." },
  { name: "audit", description: "The audit trail: events, what changed since a time, the live stream." },
  { name: "browse", description: "The namespaces and entities that hold data." },
  { name: "erasure", description: "Erase an entity for good, and the record of erasures." },
  { name: "keys", description: "API keys, and the key that calls." },
  { name: "ops", description: "Health, readiness, metrics and export. /healthz and /readyz need no key." },
  { name: "webhooks", description: "Subscriptions that push the audit trail to a URL, signed, with retries." },
  { name: "mcp", description: "The Model Context Protocol over HTTP: memd's memory tools for agents." },
  {
    name: "mem0",
    description:
      "mem0-compatible API: the paths and shapes mem0's own clients use (host changed, nothing else), over memd's " +
      "memories. Key as `Authorization: Token <key>` (or Bearer). See docs/mem0.md.",
  },
];

/** An operation's group, by its path; the first that matches. A path no rule names is grouped by its first segment. */
const groupRules: [RegExp, string][] = [
  [/^\/v[123]\/(ping|memories|entities)\//, "mem0"],
  [/^\/v1\/memory\/(search|context)$/, "search"],
  [/^\/v1\/memory\/(events|diff)(\/|$)/, "audit"],
  [/^\/v1\/memory\/(erase|erasures)$/, "erasure"],
  [/^\/v1\/memory(\/|$)/, "memory"],
  [/^\/v1\/(namespaces|entities)$/, "browse"],
  [/^\/v1\/(keys|me)(\/|$)/, "keys"],
  [/^\/(healthz|readyz|health|metrics|v1\/export)$/, "ops"],
  [/^\/v1\/webhooks(\/|$)/, "webhooks"],
  [/^\/mcp$/, "mcp"],
];

/**
 * Short labels for /docs' sidebar, by "METHOD path". The route's own summary, the longer
 * sentence, moves to the start of the description. An operation without a label gets its
 * summary's first clause (shortLabel).
 */
const labels: Record<string, string> = {
  "POST /v1/memory": "Store",
  "GET /v1/memory": "List",
  "DELETE /v1/memory": "Delete an entity's memories",
  "GET /v1/memory/{id}": "Get",
  "PATCH /v1/memory/{id}": "Edit",
  "DELETE /v1/memory/{id}": "Delete",
  "POST /v1/memory/search": "Search",
  "POST /v1/memory/context": "Context for a prompt",
  "GET /v1/memory/events": "Events",
  "POST /v1/memory/diff": "Diff since a time",
  "GET /v1/memory/events/stream": "Live stream (SSE)",
  "POST /v1/memory/erase": "Erase an entity",
  "GET /v1/memory/erasures": "List erasures",
  "GET /v1/namespaces": "Namespaces",
  "GET /v1/entities": "Entities",
  "GET /v1/me": "The calling key",
  "POST /v1/keys": "Create a key",
  "GET /v1/keys": "List keys",
  "GET /v1/keys/{id}": "Get a key",
  "DELETE /v1/keys/{id}": "Revoke a key",
  "GET /healthz": "Liveness",
  "GET /readyz": "Readiness",
  "GET /health": "Liveness (alias of /healthz)",
  "GET /metrics": "Metrics (Prometheus)",
  "GET /v1/export": "Export (JSON Lines)",
  "POST /v1/webhooks": "Subscribe",
  "GET /v1/webhooks": "List subscriptions",
  "GET /v1/webhooks/{id}": "Get a subscription",
  "PATCH /v1/webhooks/{id}": "Change, pause or resume",
  "DELETE /v1/webhooks/{id}": "Delete a subscription",
  "POST /v1/webhooks/{id}/rotate-secret": "Rotate the secret",
  "GET /v1/webhooks/{id}/deliveries": "Delivery attempts",
  "POST /v1/webhooks/{id}/replay": "Replay",
  "POST /mcp": "MCP endpoint",
  "GET /v1/ping/": "Ping",
  "POST /v1/memories/": "Add (v1)",
  "POST /v3/memories/add/": "Add",
  "POST /v1/memories/search/": "Search (v1)",
  "POST /v2/memories/search/": "Search (v2)",
  "POST /v3/memories/search/": "Search",
  "POST /v2/memories/": "Get all (v2)",
  "POST /v3/memories/": "Get all",
  "GET /v1/memories/": "Get all by id",
  "DELETE /v1/memories/": "Delete all by id",
  "GET /v1/memories/{id}/": "Get",
  "PUT /v1/memories/{id}/": "Update",
  "DELETE /v1/memories/{id}/": "Delete",
  "GET /v1/memories/{id}/history/": "History",
  "GET /v1/entities/": "Entities",
  "DELETE /v2/entities/{type}/{name}/": "Delete an entity",
  "DELETE /v1/entities/{type}/{name}/": "Delete an entity (v1)",
};

/** The most characters of a label; the sidebar shows one whole. */
const labelMax = 40;

/** A summary's first clause, within labelMax: "Recent attempts, newest first (…)" → "Recent attempts". */
function shortLabel(summary: string): string {
  const clause = summary.split(/[,;:(]| - | — /)[0]!.trim();
  if (clause.length <= labelMax) return clause;
  return `${clause.slice(0, labelMax - 1).replace(/\s+\S*$/, "")}…`;
}

/** Puts every operation in a group (`tags`) with a short label (`summary`); lists the groups in order. */
function groupOperations(doc: Doc): Doc {
  const used = new Set<string>();
  for (const [path, ops] of Object.entries(doc.paths))
    for (const [method, op] of Object.entries(ops)) {
      const group =
        groupRules.find(([rule]) => rule.test(path))?.[1] ?? (/^\/(?:v\d+\/)?([^/{]+)/.exec(path)?.[1] || "other");
      op.tags = [group];
      used.add(group);
      const label = labels[`${method.toUpperCase()} ${path}`] ?? (op.summary ? shortLabel(op.summary) : undefined);
      if (label && op.summary !== label) {
        if (op.summary) op.description = op.description ? `${op.summary}. ${op.description}` : `${op.summary}.`;
        op.summary = label;
      }
    }
  const known = groups.filter((g) => used.has(g.name));
  const others = [...used].filter((u) => !groups.some((g) => g.name === u)).map((name) => ({ name, description: "" }));
  doc.tags = [...known, ...others];
  return doc;
}

/**
 * The generator lists no media type for a body when a route parses with a function (our strict
 * JSON parser, http/json-body.ts), so the body schema would be lost. Put it back from the route's
 * own TypeBox schema, which is JSON Schema already.
 */
function restoreJsonBodies(doc: Doc, routes: Route[]) {
  for (const r of routes) {
    const op = doc.paths[r.path.replace(/:(\w+)/g, "{$1}")]?.[r.method.toLowerCase()];
    if (op?.requestBody && r.hooks?.body && Object.keys(op.requestBody.content ?? {}).length === 0)
      op.requestBody.content = { "application/json": { schema: r.hooks.body } };
  }
  return doc;
}

/**
 * Every memd operation (not mem0's, whose errors have mem0's shape) answers its errors with the
 * same body; routes that validate their answers (`response`) list only their successes, so the
 * error answer is added where none is listed.
 */
function documentErrors(doc: Doc): Doc {
  for (const ops of Object.values(doc.paths))
    for (const op of Object.values(ops)) {
      if (op.tags?.[0] === "mem0" || op.responses?.default) continue;
      op.responses = { ...op.responses, default: errorAnswer() };
    }
  return doc;
}

// Scalar's reference page, served from the binary itself: the script is the standalone build
// of @scalar/api-reference, embedded at build time, so /docs works without internet. Off: every
// feature that talks to the vendor's services. On a local address Scalar turns on "Ask AI" (its
// agent, which calls their API), "Generate MCP" (which uploads this document to them) and a
// toolbar of their dashboard (share, deploy, configure); its default fonts come from their font
// host and it reports telemetry. The client's proxy is unset, so a test request goes straight to
// this server. And the page's policy allows no connection but to this server (docsPolicy).
const scriptPath = "/docs/scalar.js";
const configuration = JSON.stringify({
  withDefaultFonts: false,
  hideClientButton: true,
  telemetry: false,
  showDeveloperTools: "never",
  mcp: { disabled: true },
  agent: { disabled: true },
});
/**
 * /docs' Content-Security-Policy: scripts, fetches, fonts and images from this server only (and
 * data:/blob: URLs the page makes itself); Scalar sets styles inline, so those are allowed.
 */
export const docsPolicy = [
  "default-src 'self'",
  "connect-src 'self'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data: blob:",
  "font-src 'self' data:",
  "worker-src 'self' blob:",
  "frame-src 'none'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join("; ");
const docsHeaders = (type: string, extra: Record<string, string> = {}) => ({
  "content-type": type,
  "content-security-policy": docsPolicy,
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  ...extra,
});
const page = `<!doctype html>
<html>
  <head>
    <title>memd API reference</title>
    <meta charset="utf-8" />
    <meta name="viewport" content="width=device-width, initial-scale=1" />
  </head>
  <body>
    <noscript>The reference page needs JavaScript. The OpenAPI document is at <a href="${specPath}">${specPath}</a>.</noscript>
    <script id="api-reference" data-url="${specPath}" data-configuration='${configuration}'></script>
    <script src="${scriptPath}"></script>
  </body>
</html>`;

/**
 * `GET /v1/openapi.json`, generated by @elysiajs/openapi's `toOpenAPISchema` from the route
 * schemas that validate requests, and a reference page at `/docs` (Scalar, served from the
 * binary: no outside address). No key.
 * We call the generator rather than `.use(openapi())` so that no hook of the plugin sits on the
 * request path of the other routes.
 */
export const openapiRoutes = () => {
  const plugin = new Elysia({ name: "openapi" });
  let doc: unknown;
  const build = () => {
    // The routes are fixed once the server listens, so the document is built once.
    // biome-ignore lint/complexity/useLiteralKeys: getGlobalRoutes is protected in Elysia's types
    const routes = plugin["getGlobalRoutes"]() as Route[];
    const generated = toOpenAPISchema(plugin, { paths: [specPath, "/docs", scriptPath] }) as unknown as Doc;
    const restored = restoreJsonBodies(
      {
        openapi: "3.1.0",
        info: {
          title: "memd",
          version,
          description:
            "A memory service for AI agents: memories per namespace and entity, an audit trail, diff and events.",
        },
        security: [{ bearer: [] }],
        ...generated,
        components: { ...generated.components, securitySchemes: { bearer: { type: "http", scheme: "bearer" } } },
      } as Doc,
      routes,
    );
    return documentErrors(groupOperations(restored));
  };
  return plugin
    .get(specPath, () => (doc ??= build()), { detail: { hide: true } })
    .get("/docs", () => new Response(page, { headers: docsHeaders("text/html; charset=utf-8") }), {
      detail: { hide: true },
    })
    .get(
      scriptPath,
      () =>
        new Response(scalarScript, {
          headers: docsHeaders("text/javascript; charset=utf-8", { "cache-control": "public, max-age=86400" }),
        }),
      { detail: { hide: true } },
    );
};
