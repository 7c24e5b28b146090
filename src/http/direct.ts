import type { TSchema } from "@sinclair/typebox";
import { TypeCompiler } from "@sinclair/typebox/compiler";
import type { Logger } from "../log";
import { toApiError } from "./error-handler";
import { isJsonType, maxBodyBytes, parseJsonBody } from "./json-body";
import { type RequestInfo, requestIdOf } from "./request-log";

/** The key a request authenticated with, as direct routes need it. */
export interface DirectKey {
  id: string;
}

/**
 * A POST route answered by Bun's router directly, without Elysia's per-request hooks: on memd's
 * hottest path, the raw store, those hooks cost more than the store itself (bench/notes.md,
 * issue 13). The app keeps its own route of the same method and path (for `app.handle`, MCP and
 * the OpenAPI document), and a direct route serves only the plain case: an authenticated key
 * with the permission, a JSON body that passes the route's schema, no query string, and what
 * `serves` accepts. Anything else is handed to the app unchanged (its body re-attached), so
 * every refusal is answered by the one pipeline and error handler, with the same words.
 */
export interface DirectRoute<Body, Key extends DirectKey> {
  path: string;
  /** Whether the key may use the route at all (the app answers 403 when not). */
  allows(key: Key): boolean;
  /**
   * The route's body schema, as the app's route declares it, in plain TypeBox: Elysia's
   * coercing types (t.Integer, t.Numeric) would let through strings that the app converts.
   */
  body: TSchema;
  /** Top-level fields of the body holding free-form objects (see refuseDangerousKeys). */
  freeForm?: readonly string[];
  /** Whether to answer here; false leaves the request to the app (e.g. a smart store). */
  serves(request: Request, body: Body): boolean;
  /**
   * The answer: a value (sent as JSON, status 200) or a Response sent as it is (e.g. an answer
   * replayed for an Idempotency-Key); may throw as the app's handler does (mapped by the app's
   * error handler's rules).
   */
  handle(body: Body, key: Key, headers: Record<string, string>, request: Request): Promise<unknown>;
}

/** What a direct route shares with the request pipeline, so both count, limit and log alike. */
export interface DirectPipeline<Key extends DirectKey> {
  logger: Logger;
  /** The pipeline's authentication: a key, undefined (no key needed), or a 401 thrown. */
  authenticate(request: Request, path: string): Key | undefined | Promise<Key>;
  /** The pipeline's rate limit: takes a token of the key's bucket, or throws 429. */
  take?(keyId: string): void;
  /** The pipeline's end of a request: its metrics and log line. */
  finish(request: Request, route: string, status: number, info: RequestInfo): void;
}

type Handler = (request: Request) => Promise<Response>;

/**
 * Bun `routes` entries (`{ [path]: { POST } }`) for direct routes; `app` answers whatever a
 * direct route leaves. Checks without side effects come first, so a request handed over has
 * changed nothing; the token is taken only once the request is known to be served here.
 */
export function directRoutes<Key extends DirectKey>(
  // biome-ignore lint/suspicious/noExplicitAny: each route has its own body type
  routes: DirectRoute<any, Key>[],
  pipeline: DirectPipeline<Key>,
  app: Handler,
): Record<string, { POST: Handler }> {
  const out: Record<string, { POST: Handler }> = {};
  for (const route of routes) {
    const check = TypeCompiler.Compile(route.body);
    const options = { freeForm: route.freeForm };
    out[route.path] = {
      async POST(request) {
        const at = performance.now();
        if (request.url.includes("?") || !isJsonType(request.headers.get("content-type"))) return app(request);
        if (Number(request.headers.get("content-length") ?? 0) > maxBodyBytes) return app(request);
        let key: Key | undefined;
        try {
          const found = pipeline.authenticate(request, route.path);
          key = found instanceof Promise ? await found : found;
        } catch {
          return app(request);
        }
        const bytes = await request.arrayBuffer();
        let body: unknown;
        try {
          body = parseJsonBody(bytes, options);
        } catch {
          return app(again(request, bytes));
        }
        if (!key || !route.allows(key) || !check.Check(body) || !route.serves(request, body))
          return app(again(request, bytes));
        try {
          pipeline.take?.(key.id);
        } catch {
          return app(again(request, bytes));
        }
        const info: RequestInfo = { at, id: requestIdOf(request), path: route.path, key };
        const headers: Record<string, string> = { "x-request-id": info.id };
        let response: Response;
        try {
          const value = await route.handle(body, key, headers, request);
          if (value instanceof Response) {
            for (const [name, v] of Object.entries(headers)) value.headers.set(name, v);
            response = value;
          } else {
            // JSON.stringify and a plain Response: in a profile of the server, Response.json took
            // 9% of the samples and JSON.stringify 2% (bench/notes.md).
            headers["content-type"] = "application/json;charset=utf-8";
            response = new Response(JSON.stringify(value), { headers });
          }
        } catch (error) {
          const e = toApiError("UNKNOWN", error, pipeline.logger);
          Object.assign(headers, e.headers, { "content-type": "application/json" });
          response = new Response(JSON.stringify(e.toBody()), { status: e.status, headers });
        }
        pipeline.finish(request, route.path, response.status, info);
        return response;
      },
    };
  }
  return out;
}

/** The request as it came, its body (already read) attached again. */
const again = (request: Request, body: ArrayBuffer) =>
  new Request(request.url, { method: request.method, headers: request.headers, body });
