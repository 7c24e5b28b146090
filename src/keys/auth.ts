import { Elysia } from "elysia";
import type { MemoryRecord } from "../storage/records";
import type { KeyStore, MemoryReads } from "../storage/storage";
import { ApiError } from "../wire/errors";
import { isUuid } from "../wire/schemas";
import type { KeyRecord, Permission } from "./model";
import { authenticate, covers, permits, requireNamespace } from "./service";

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
 * `namespace` macro below); the entry points outside what a route can declare call this with
 * theirs: the raw store's direct route (memory/index.ts `directStore`, served before Elysia's
 * hooks run), the namespace a mem0 call lands in (mem0/service.ts `namespaceOf`: a header, the
 * key's one namespace or a setting), and the entities page that mem0's GET /v1/entities/ answers
 * for memd's calls (browse/index.ts `browseEntities`; Elysia's router cannot tell the two apart).
 */
export function checkScope(apiKey: KeyRecord, named: unknown) {
  for (const ns of Array.isArray(named) ? named : [named]) if (typeof ns === "string") requireNamespace(apiKey, ns);
}

/**
 * A memory named by id, as the key may see it: the record when the key covers its namespace, else
 * undefined, so that a memory of another namespace answers exactly as one that does not exist
 * (404 not_found, at the same point of the handler), and ids of other namespaces cannot be probed.
 * The one rule for memories named by id, applied by the `memory` macro below (memd's and mem0's
 * routes by id, and the events of one memory).
 */
export function visibleMemory<R extends { namespace: string }>(
  apiKey: KeyRecord,
  record: R | undefined,
): R | undefined {
  return record !== undefined && covers(apiKey, record.namespace) ? record : undefined;
}

/** Where a route's memory id is: the path's `:id`, or the query's optional `memoryId`. */
export type MemoryIdAt = "params.id" | "query.memoryId";

/**
 * The route macros: each route declares what it needs, and the checks are made here.
 * `permission`: a route with `{ permission: "read" }` gets `apiKey` (the key the request pipeline
 * authenticated) in its context, or answers 403 when the key's permission does not include it.
 * `namespace`: where the route's namespace is, `"body"` or `"query"` (its `namespace` field, when
 * given, after validation); a key that does not cover it gets 403 before the handler runs.
 * `memory`: where the id of the memory the route names is (MemoryIdAt); its namespace is that
 * memory's. The memory is read here once (any record, current or not: `memories.getMemory`) and
 * handed to the handler as `memory`: undefined when there is no such memory or the key does not
 * cover its namespace (visibleMemory), and the handler answers 404 for undefined where it always
 * did, so a foreign id and an unknown one get the same answer at the same point.
 * Declare `permission` first: a missing permission is said before the scope. `keyOf` reads back
 * the key that authenticated a request, which the request pipeline keeps with the request (so
 * keys need not import the pipeline).
 */
export function auth(keyOf: (request: Request) => KeyRecord | undefined, memories: MemoryReads) {
  const keyFor = (request: Request) => {
    const apiKey = keyOf(request);
    if (!apiKey) throw new ApiError("unauthorized", "send the key as Authorization: Bearer <key>");
    return apiKey;
  };
  const memoryFor = async (apiKey: KeyRecord, id: unknown): Promise<MemoryRecord | undefined> =>
    typeof id === "string" && isUuid(id) ? visibleMemory(apiKey, await memories.getMemory(id)) : undefined;
  return new Elysia({ name: "auth" }).macro({
    permission: (needed: Permission) => ({
      resolve({ request }) {
        const apiKey = keyFor(request);
        if (!permits(apiKey, needed)) throw new ApiError("forbidden", `this key lacks the ${needed} permission`);
        return { apiKey };
      },
    }),
    namespace: (from: "body" | "query") => ({
      resolve({ request, body, query }) {
        checkScope(
          keyFor(request),
          ((from === "body" ? body : query) as { namespace?: unknown } | undefined)?.namespace,
        );
        return {};
      },
    }),
    memory: (at: MemoryIdAt) => ({
      async resolve({ request, query, params }) {
        const apiKey = keyFor(request);
        const id =
          at === "params.id"
            ? (params as Record<string, unknown> | undefined)?.id
            : (query as Record<string, unknown> | undefined)?.memoryId;
        return { memory: await memoryFor(apiKey, id) };
      },
    }),
  });
}
