// The LMDB answers kept for Idempotency-Keys (written by apply, writes.ts), read and swept.
import type { IdempotencyEntry } from "../records";
import type { Idempotency } from "../storage";
import { keys } from "./layout";
import type { LmdbState } from "./state";
import { write } from "./writes";

export function lmdbIdempotency(s: LmdbState): Idempotency {
  const { dbs } = s;
  return {
    async idempotentAnswer(keyId, key, now) {
      const e = dbs.idempotency.get(keys.idempotency(keyId, key)) as IdempotencyEntry | undefined;
      return e?.state === "done" && e.expiresAt > now ? e : undefined;
    },

    sweepIdempotency(now, limit) {
      const due = [...dbs.idempotencyExpiries.getKeys({ start: [0], end: [now + 1], limit })] as [
        number,
        string,
        string,
      ][];
      if (due.length === 0) return Promise.resolve(0);
      return write(s, (w) => {
        for (const [at, keyId, key] of due) {
          w.remove(dbs.idempotencyExpiries, [at, keyId, key]);
          const e = dbs.idempotency.get(keys.idempotency(keyId, key)) as IdempotencyEntry | undefined;
          if (e && e.expiresAt === at) w.remove(dbs.idempotency, keys.idempotency(keyId, key));
        }
        return due.length;
      });
    },
  };
}
