// The LMDB API keys: api_keys by id, api_key_hashes from a secret's hash to its key.
import { isMainThread } from "node:worker_threads";
import type { KeyRecord } from "../records";
import type { KeyStore } from "../storage";
import type { LmdbState } from "./state";
import { write } from "./writes";

export function lmdbKeys(s: LmdbState): KeyStore {
  const { env, dbs } = s;
  return {
    insertKey(key, options = {}) {
      return write(s, (w) => {
        if (options.onlyIfNone && [...dbs.apiKeys.getKeys({ limit: 1 })].length > 0) return false;
        w.put(dbs.apiKeys, key.id, key);
        w.put(dbs.apiKeyHashes, key.hash, key.id);
        return true;
      });
    },

    async getKey(id) {
      // On the webhook delivery thread, a revocation the request thread just committed must be seen.
      if (!isMainThread) env.resetReadTxn();
      return dbs.apiKeys.get(id) as KeyRecord | undefined;
    },

    async keyByHash(hash) {
      // `memd keys` writes from another process, which this process's cached read snapshot may
      // not show yet: renew it, so a key made or revoked there counts at the next request.
      env.resetReadTxn();
      const id = dbs.apiKeyHashes.get(hash) as string | undefined;
      return id === undefined ? undefined : (dbs.apiKeys.get(id) as KeyRecord | undefined);
    },

    async listKeys() {
      // Keys are few (made by hand), so reading them all is fine.
      return [...dbs.apiKeys.getRange({})].map((e) => e.value as KeyRecord);
    },

    async revokeKey(id, at) {
      return write(s, (w) => {
        const k = dbs.apiKeys.get(id) as KeyRecord | undefined;
        if (!k || k.revokedAt !== null) return false;
        w.put(dbs.apiKeys, id, { ...k, revokedAt: at });
        w.remove(dbs.apiKeyHashes, k.hash);
        return true;
      });
    },

    async touchKey(id, at) {
      await env.transaction(() => {
        const k = dbs.apiKeys.get(id) as KeyRecord | undefined;
        if (k) dbs.apiKeys.putSync(id, { ...k, lastUsedAt: at });
      });
    },
  };
}
