// The PostgreSQL API keys (api_keys).
import type { KeyStore } from "../storage";
import { keyOf, keyRow } from "./rows";
import type { PgState } from "./state";

export function pgKeys(s: PgState): KeyStore {
  const { read, write } = s;
  return {
    async insertKey(k, options = {}) {
      return write(async (tx) => {
        if (options.onlyIfNone) {
          // The schema version row is the lock every replica takes: one first key, not one each.
          await tx`SELECT 1 FROM memd_schema WHERE id = 1 FOR UPDATE`;
          if ((await tx`SELECT 1 FROM api_keys LIMIT 1`).length > 0) return false;
        }
        await tx`INSERT INTO api_keys ${tx(keyRow(k))}`;
        return true;
      });
    },

    async getKey(id) {
      if (id.includes("\0")) return undefined; // PostgreSQL text cannot hold NUL, so no key has it
      const [r] = await read((sql) => sql`SELECT * FROM api_keys WHERE id = ${id}`);
      return r ? keyOf(r) : undefined;
    },

    async keyByHash(hash) {
      const [r] = await read((sql) => sql`SELECT * FROM api_keys WHERE hash = ${hash}`);
      return r ? keyOf(r) : undefined;
    },

    async listKeys() {
      return (await read((sql) => sql`SELECT * FROM api_keys ORDER BY created_at, id`)).map(keyOf);
    },

    async revokeKey(id, at) {
      if (id.includes("\0")) return false;
      const rows = await write(
        (tx) => tx`UPDATE api_keys SET revoked_at = ${at} WHERE id = ${id} AND revoked_at IS NULL RETURNING id`,
      );
      return rows.length === 1;
    },

    async touchKey(id, at) {
      await read((sql) => sql`UPDATE api_keys SET last_used_at = ${at} WHERE id = ${id}`);
    },
  };
}
