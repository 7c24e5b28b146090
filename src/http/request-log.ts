import type { Logger } from "../log";

/** What the pipeline knows of a request in flight: start time, id, path (no query). */
export interface RequestInfo {
  at: number;
  id: string;
  path: string;
  /** The key that authenticated it, once known (the pipeline's; keys/auth.ts reads it back). */
  key?: { id: string };
}

const started = new WeakMap<Request, RequestInfo>();
/** A caller's id is kept when it is 1 to 200 printable ASCII characters (spaces inside allowed). */
const validId = /^[\x21-\x7e](?:[\x20-\x7e]{0,198}[\x21-\x7e])?$/;

/** Request id and timing of a request, if it passed through the pipeline. */
export const requestInfo = (request: Request) => started.get(request);

/** The path of a URL, without the query string. */
export function pathOf(url: string) {
  const start = url.indexOf("/", url.indexOf("//") + 2);
  const q = url.indexOf("?", start);
  return q === -1 ? url.slice(start) : url.slice(start, q);
}

/**
 * A new request id: a random UUID. Measured against a process prefix plus a counter
 * (bench/request-id.ts): Bun's randomUUID draws from a buffered CSPRNG and costs ~60 ns, the
 * counter's hex formatting ~110-230 ns, so the UUID stays.
 */
export const newRequestId = (): string => crypto.randomUUID();

/** A request's id: the caller's `x-request-id` if sane, else a new one. */
export function requestIdOf(request: Request): string {
  const given = request.headers.get("x-request-id");
  return given !== null && validId.test(given) ? given : newRequestId();
}

/** Starts a request: its id (the caller's, if sane) set as `x-request-id`, and its start time. */
export function beginRequest(
  request: Request,
  headers: Record<string, unknown>,
  path: string,
  at = performance.now(),
): RequestInfo {
  const id = requestIdOf(request);
  const info: RequestInfo = { at, id, path };
  started.set(request, info);
  headers["x-request-id"] = id;
  return info;
}

/** The status an answered request carried. */
export const statusOf = (set: { status?: unknown }) => (typeof set.status === "number" ? set.status : 200);

/** Writes a request's one log line. */
export function logRequest(
  logger: Logger,
  request: Request,
  status: number,
  info: RequestInfo | undefined,
  keyId: string | undefined,
  now = performance.now(),
) {
  logger.info("request", {
    method: request.method,
    path: info ? info.path : pathOf(request.url),
    status,
    ms: info ? Math.round((now - info.at) * 100) / 100 : undefined,
    requestId: info?.id,
    keyId,
  });
}
