import { Elysia } from "elysia";
import type { Logger } from "../log";

const started = new WeakMap<Request, { at: number; id: string }>();
const validId = /^[\w.:-]{1,128}$/;

/** Request id and timing of a request, if it passed through requestLog. */
export const requestInfo = (request: Request) => started.get(request);

/**
 * Gives every response an `x-request-id` (the caller's, if it sent a sane one) and writes one
 * log line per request: method, path (no query string), status, milliseconds, request id and
 * key id. Never bodies, never keys.
 */
export function requestLog(logger: Logger, keyIdOf: (r: Request) => string | undefined) {
  return new Elysia({ name: "request-log" })
    .onRequest(function tagRequest({ request, set }) {
      const given = request.headers.get("x-request-id");
      const id = given && validId.test(given) ? given : crypto.randomUUID();
      started.set(request, { at: performance.now(), id });
      set.headers["x-request-id"] = id;
    })
    .onAfterResponse({ as: "global" }, function logRequest({ request, set }) {
      const info = started.get(request);
      const url = request.url;
      const start = url.indexOf("/", url.indexOf("//") + 2);
      const q = url.indexOf("?", start);
      logger.info("request", {
        method: request.method,
        path: q === -1 ? url.slice(start) : url.slice(start, q),
        status: typeof set.status === "number" ? set.status : 200,
        ms: info ? Math.round((performance.now() - info.at) * 100) / 100 : undefined,
        requestId: info?.id,
        keyId: keyIdOf(request),
      });
    });
}
