import { ApiError } from "../wire/errors";

export interface RateLimitOptions {
  /** Tokens added per second. */
  rps: number;
  /** Most tokens a bucket holds; defaults to `rps` (at least 1). */
  burst?: number;
  /** Clock in milliseconds; tests pass their own. */
  now?: () => number;
}

interface Bucket {
  tokens: number;
  at: number;
}

/**
 * A token bucket per bucket id (for memd: per key), as the request pipeline takes them: a request
 * takes one token; with none left, 429 `rate_limited` is thrown with a `Retry-After` in whole
 * seconds (at least 1).
 */
export function tokenBuckets({
  rps,
  burst = Math.max(1, Math.ceil(rps)),
  now = () => performance.now(),
}: RateLimitOptions): (id: string) => void {
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
