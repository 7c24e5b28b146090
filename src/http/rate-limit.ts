import { Elysia } from "elysia";
import { ApiError } from "./errors";

export interface RateLimitOptions {
  /** Tokens added per second. */
  rps: number;
  /** Most tokens a bucket holds; defaults to `rps` (at least 1). */
  burst?: number;
  /** The bucket a request draws from; `undefined` means not limited (e.g. no key). */
  bucketOf: (request: Request) => string | undefined;
  /** Clock in milliseconds; tests pass their own. */
  now?: () => number;
}

interface Bucket {
  tokens: number;
  at: number;
}

/**
 * A token bucket per bucket id (for memd: per key). A request takes one token; with none left it
 * gets 429 `rate_limited` and a `Retry-After` in whole seconds (at least 1). Register it after
 * the hook that identifies the caller, so `bucketOf` can see who it is.
 */
export function rateLimit({ bucketOf, ...options }: RateLimitOptions) {
  const take = tokenBuckets(options);
  return new Elysia().onRequest(function limitRate({ request }) {
    const id = bucketOf(request);
    if (id !== undefined) take(id);
  });
}

/** rateLimit's buckets as a function of the bucket id, for the request pipeline: throws 429 when empty. */
export function tokenBuckets({
  rps,
  burst = Math.max(1, Math.ceil(rps)),
  now = () => performance.now(),
}: Omit<RateLimitOptions, "bucketOf">): (id: string) => void {
  // One entry per bucket id ever seen; with per-key ids that is bounded by the number of keys.
  const buckets = new Map<string, Bucket>();
  return (id) => {
    const t = now();
    let b = buckets.get(id);
    if (b === undefined) {
      b = { tokens: burst, at: t };
      buckets.set(id, b);
    }
    b.tokens = Math.min(burst, b.tokens + ((t - b.at) / 1000) * rps);
    b.at = t;
    if (b.tokens >= 1) {
      b.tokens -= 1;
      return;
    }
    const retryAfter = Math.max(1, Math.ceil((1 - b.tokens) / rps));
    throw new ApiError("rate_limited", `too many requests; retry in ${retryAfter} s`, undefined, {
      "retry-after": String(retryAfter),
    });
  };
}
