import { Elysia } from "elysia";
import type { KeyStore } from "../storage/storage";
import { ApiError } from "../wire/errors";
import type { KeyRecord, Permission } from "./model";
import { authenticate, permits, requireNamespace } from "./service";

// The scheme is case-insensitive in HTTP (RFC 9110 11.1): "bearer" and "BEARER" work too.
// "Token" is the scheme the mem0 clients send (src/mem0): the same key, the same checks.
const bearer = /^(?:Bearer|Token) +([\x21-\x7e]{1,512})$/i;

/** Paths under /v1 need a key, except the OpenAPI document; so do /v2 and /v3 (mem0's API, src/mem0). */
const needsKey = (path: string) =>
  (path.startsWith("/v1/") && path !== "/v1/openapi.json") || path.startsWith("/v2/") || path.startsWith("/v3/");

export interface AuthOptions {
  storage: KeyStore;
  /** The in-memory root key from MEMD_API_KEY, if set. */
  root?: KeyRecord;
  /** Extra paths outside /v1 that need a key (e.g. /metrics). */
  protectedPaths?: string[];
}

/**
 * The request pipeline's authentication, as a function of the request and its path (no query):
 * the key that authenticated it, undefined for a path that needs none, or a 401 thrown. Answers
 * without a promise when the key is cached (see authenticate).
 */
export function authenticator({ storage, root, protectedPaths = [] }: AuthOptions) {
  const extra = new Set(protectedPaths);
  return (request: Request, path: string): KeyRecord | undefined | Promise<KeyRecord> => {
    if (!needsKey(path) && !extra.has(path)) return undefined;
    const header = request.headers.get("authorization");
    if (header === null) throw new ApiError("unauthorized", "send the key as Authorization: Bearer <key>");
    const m = bearer.exec(header);
    if (!m) throw new ApiError("unauthorized", "malformed Authorization header; expected Bearer <key>");
    return authenticate(storage, root, m[1]);
  };
}

/**
 * The key's scope, checked in one place: every namespace a request names (a string, or a list of
 * them) must be covered by the key, else 403. Routes declare where their namespace is (the
 * `namespace` macro below); the entry points outside Elysia's routes (the raw store's direct
 * route, mem0's entities) call this with theirs.
 */
export function checkScope(apiKey: KeyRecord, named: unknown) {
  for (const ns of Array.isArray(named) ? named : [named]) if (typeof ns === "string") requireNamespace(apiKey, ns);
}

/**
 * The route macros. `permission`: a route with `{ permission: "read" }` gets `apiKey` (the key the
 * request pipeline authenticated) in its context, or answers 403 when the key's permission does
 * not include it. `namespace`: where the route's namespace is, `"body"` or `"query"` (its
 * `namespace` field, when given, after validation); a key that does not cover it gets 403 before
 * the handler runs. Declare `permission` first: a missing permission is said before the scope.
 * `keyOf` reads back the key that authenticated a request, which the request pipeline keeps with
 * the request (so keys need not import the pipeline).
 */
export function auth(keyOf: (request: Request) => KeyRecord | undefined) {
  return new Elysia({ name: "auth" }).macro({
    permission: (needed: Permission) => ({
      resolve({ request }) {
        const apiKey = keyOf(request);
        if (!apiKey) throw new ApiError("unauthorized", "send the key as Authorization: Bearer <key>");
        if (!permits(apiKey, needed)) throw new ApiError("forbidden", `this key lacks the ${needed} permission`);
        return { apiKey };
      },
    }),
    namespace: (from: "body" | "query") => ({
      resolve({ request, body, query }) {
        const apiKey = keyOf(request);
        if (!apiKey) throw new ApiError("unauthorized", "send the key as Authorization: Bearer <key>");
        checkScope(apiKey, ((from === "body" ? body : query) as { namespace?: unknown } | undefined)?.namespace);
        return {};
      },
    }),
  });
}
