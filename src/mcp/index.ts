import { Elysia } from "elysia";
import { requestInfo } from "../http/request-log";
import type { auth } from "../keys/auth";
import { ApiError } from "../wire/errors";
import type { Fetch } from "./tools";

// The MCP SDK (with its schema validators) adds ~25 ms to every start; load it on first use.
let sdk:
  | Promise<[typeof import("./server"), typeof import("@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js")]>
  | undefined;
const loadSdk = () =>
  (sdk ??= Promise.all([import("./server"), import("@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js")]));

const notAllowed = () =>
  new ApiError("method_not_allowed", "this MCP endpoint is stateless: send JSON-RPC messages with POST", undefined, {
    allow: "POST",
  });

/**
 * `POST /mcp`: the MCP tools over the streamable HTTP transport, stateless (no session; a server
 * and a transport per request, answering JSON rather than an event stream). The tools call the
 * REST API through `handle` (the app's own `app.handle`) with the caller's Authorization header,
 * so a key can do over MCP exactly what it can do over REST. Optional `?namespace=&entity=` on
 * the URL set the tools' defaults, like `memd mcp --namespace --entity`.
 */
export const mcpRoutes = (authPlugin: ReturnType<typeof auth>, handle: Fetch) =>
  new Elysia({ name: "mcp" })
    .use(authPlugin)
    .post(
      "/mcp",
      async ({ request, body, set }) => {
        const [{ createMcpServer }, { WebStandardStreamableHTTPServerTransport }] = await loadSdk();
        const url = new URL(request.url);
        const requestId = requestInfo(request)?.id;
        const server = createMcpServer({
          fetch: handle,
          baseUrl: url.origin,
          authorization: request.headers.get("authorization") ?? undefined,
          // The REST calls a tool makes log under the id of the MCP request that caused them.
          headers: requestId ? { "x-request-id": requestId } : {},
          defaults: {
            namespace: url.searchParams.get("namespace") || undefined,
            entity: url.searchParams.get("entity") || undefined,
          },
        });
        const transport = new WebStandardStreamableHTTPServerTransport({
          sessionIdGenerator: undefined,
          enableJsonResponse: true,
        });
        await server.connect(transport);
        try {
          // The body was already read and checked by the JSON body parser: hand it over parsed.
          const response = await transport.handleRequest(request, { parsedBody: body });
          set.status = response.status; // for the request log and metrics, which read set.status
          return response;
        } finally {
          await server.close();
        }
      },
      { permission: "read", detail: { summary: "MCP (streamable HTTP, stateless)", tags: ["mcp"] } },
    )
    .get(
      "/mcp",
      () => {
        throw notAllowed();
      },
      { detail: { hide: true } },
    )
    .delete(
      "/mcp",
      () => {
        throw notAllowed();
      },
      { detail: { hide: true } },
    );
