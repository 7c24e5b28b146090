import { Elysia } from "elysia";
import type { Logger } from "../log";
import type { RequestMetrics } from "../ops/metrics";
import type { KeyRecord } from "../storage/records";
import { type DirectRoute, directRoutes } from "./direct";
import { refuseBody } from "./json-body";
import { methodCheck, type RouteInfo } from "./methods";
import { checkQueryString } from "./query";
import { type RateLimitOptions, tokenBuckets } from "./rate-limit";
import { beginRequest, logRequest, type RequestInfo, requestInfo, statusOf } from "./request-log";

/**
 * Who sent a request, from the request and its path (no query): the key that authenticated it,
 * undefined for a path that needs none, or a 401 thrown. Answers without a promise when it can.
 * The keys feature makes one (keys/auth.ts authenticator); the pipeline only calls it.
 */
export type Authenticator = (request: Request, path: string) => KeyRecord | undefined | Promise<KeyRecord>;

export interface PipelineOptions {
  logger: Logger;
  authenticate: Authenticator;
  /** Token buckets per key; none when rate limiting is off. */
  rateLimit?: RateLimitOptions;
  /** Every route of the app, read on the first request (see methodCheck). */
  routes: () => RouteInfo[];
  /** Where answered requests are counted by route template and status (served at /metrics). */
  metrics: RequestMetrics;
  /**
   * Query parameters that may repeat (lists such as `tag`), by path; "*" for the paths not named
   * (a path's own list replaces it). Any other parameter given twice is a 400.
   */
  repeatableQuery?: Record<string, readonly string[]>;
}

/**
 * The request pipeline around every route, as one onRequest and one onAfterResponse hook
 * (Elysia's cost is per hook, so this replaces one plugin each). Before routing, in this order:
 * request id (`x-request-id`), authentication (401 before any body is read), rate limit per key
 * (429), method guard (405 with Allow), strict query string (400), no body on GET/HEAD/DELETE
 * (400). After the answer: one log line and the metrics of the route template and status.
 * The path is cut from the URL once per request, and each check is a plain function of its
 * feature's module. `direct` makes routes served outside Elysia with the same checks and records.
 */
export function pipeline({ logger, authenticate, rateLimit, routes, metrics, repeatableQuery = {} }: PipelineOptions) {
  const repeatable = (path: string) => repeatableQuery[path] ?? repeatableQuery["*"];
  const take = rateLimit ? tokenBuckets(rateLimit) : undefined;
  const allowMethod = methodCheck(routes);
  const finish = (request: Request, route: string, status: number, info: RequestInfo | undefined) => {
    const now = performance.now();
    metrics.observe(request.method, route, status, info ? (now - info.at) / 1000 : 0);
    logRequest(logger, request, status, info, info?.key?.id, now);
  };
  const hooks = new Elysia({ name: "pipeline" })
    .onRequest(async function admitRequest({ request, set }) {
      const url = request.url;
      const start = url.indexOf("/", url.indexOf("//") + 2);
      const q = url.indexOf("?", start);
      const info = beginRequest(request, set.headers, q === -1 ? url.slice(start) : url.slice(start, q));
      let key = authenticate(request, info.path);
      if (key instanceof Promise) key = await key;
      if (key !== undefined) {
        info.key = key;
        take?.(key.id);
      }
      allowMethod(request.method, info.path);
      if (q !== -1) checkQueryString(url, q, repeatable(info.path));
      refuseBody(request);
    })
    .onAfterResponse({ as: "global" }, function recordRequest({ request, route, set }) {
      finish(request, route || "(unmatched)", statusOf(set), requestInfo(request));
    });
  /** Direct routes (see direct.ts) with this pipeline's authentication, buckets, metrics and log. */
  const direct = (
    // biome-ignore lint/suspicious/noExplicitAny: each route has its own body type
    list: DirectRoute<any, KeyRecord>[],
    app: (request: Request) => Promise<Response>,
  ) => directRoutes(list, { logger, authenticate, take, finish }, app);
  return { hooks, direct };
}
