import { Elysia } from "elysia";
import { ApiError } from "../http/errors";
import type { Storage } from "../storage/storage";
import type { KeyRecord, Permission } from "./model";
import { authenticate, permits } from "./service";

// The scheme is case-insensitive in HTTP (RFC 9110 11.1): "bearer" and "BEARER" work too.
const bearer = /^Bearer +([\x21-\x7e]{1,512})$/i;
const keyOfRequest = new WeakMap<Request, KeyRecord>();

/** The key that authenticated a request, if any (for logs and limits). */
export const keyOf = (request: Request) => keyOfRequest.get(request);

/** Paths under /v1 need a key, except the OpenAPI document. */
const needsKey = (path: string) => path.startsWith("/v1/") && path !== "/v1/openapi.json";

function pathOf(url: string) {
  const start = url.indexOf("/", url.indexOf("//") + 2);
  const q = url.indexOf("?", start);
  return q === -1 ? url.slice(start) : url.slice(start, q);
}

export interface AuthOptions {
  storage: Storage;
  /** The in-memory root key from MEMD_API_KEY, if set. */
  root?: KeyRecord;
  /** Extra paths outside /v1 that need a key (e.g. /metrics). */
  protectedPaths?: string[];
  /** false: no onRequest hook of its own; the request pipeline calls `authenticator` instead. */
  hook?: boolean;
}

/**
 * The check of auth's onRequest hook as a function of the request and its path (no query):
 * the key that authenticated it (also kept for `keyOf`), undefined for a path that needs none,
 * or a 401 thrown. Answers without a promise when the key is cached (see authenticate).
 */
export function authenticator({ storage, root, protectedPaths = [] }: AuthOptions) {
  const extra = new Set(protectedPaths);
  return (request: Request, path: string): KeyRecord | undefined | Promise<KeyRecord> => {
    if (!needsKey(path) && !extra.has(path)) return undefined;
    const header = request.headers.get("authorization");
    if (header === null) throw new ApiError("unauthorized", "send the key as Authorization: Bearer <key>");
    const m = bearer.exec(header);
    if (!m) throw new ApiError("unauthorized", "malformed Authorization header; expected Bearer <key>");
    const key = authenticate(storage, root, m[1]);
    if (key instanceof Promise)
      return key.then((k) => {
        keyOfRequest.set(request, k);
        return k;
      });
    keyOfRequest.set(request, key);
    return key;
  };
}

/**
 * Authenticates every /v1 request before its body is read (401 first, whatever the body), and
 * adds the `permission` macro: a route with `{ permission: "read" }` gets `apiKey` in its
 * context, or answers 403 when the key's permission does not include it.
 */
export function auth(options: AuthOptions) {
  const check = authenticator(options);
  const plugin = new Elysia({ name: "auth" });
  if (options.hook !== false)
    plugin.onRequest(async function authenticateRequest({ request }) {
      await check(request, pathOf(request.url));
    });
  return plugin.macro({
    permission: (needed: Permission) => ({
      resolve({ request }) {
        const apiKey = keyOfRequest.get(request);
        if (!apiKey) throw new ApiError("unauthorized", "send the key as Authorization: Bearer <key>");
        if (!permits(apiKey, needed)) throw new ApiError("forbidden", `this key lacks the ${needed} permission`);
        return { apiKey };
      },
    }),
  });
}
