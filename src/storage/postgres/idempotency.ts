// The PostgreSQL answers kept for Idempotency-Keys (written by apply, writes.ts), read and swept.
import type { IdempotencyEntry } from "../records";
import type { Idempotency } from "../storage";
import type { PgState } from "./state";

export function pgIdempotency(s: PgState): Idempotency {
  const { read } = s;
  return {
    async idempotentAnswer(keyId, key, now) {
      const [r] = await read(
        (sql) => sql`SELECT * FROM idempotency WHERE key_id = ${keyId} AND idem_key = ${key}
          AND state = 'done' AND expires_at > ${now}`,
      );
      if (!r) return undefined;
      const entry: IdempotencyEntry = {
        keyId,
        key,
        hash: r.hash as string,
        state: "done",
        status: Number(r.status),
        body: r.body as string,
        createdAt: Number(r.created_at),
        expiresAt: Number(r.expires_at),
      };
      return entry;
    },

    async sweepIdempotency(now, limit) {
      const rows = await read(
        (sql) => sql`DELETE FROM idempotency WHERE (key_id, idem_key) IN (
          SELECT key_id, idem_key FROM idempotency WHERE expires_at <= ${now} LIMIT ${limit}) RETURNING 1`,
      );
      return rows.length;
    },
  };
}
