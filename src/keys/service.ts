import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import { ApiError } from "../http/errors";
import type { Store } from "../storage/store";
import { type ApiKey, type KeyRecord, type Permission, permissions } from "./model";

/** Secrets carry this prefix so secret scanners can spot leaked ones. */
export const secretPrefix = "memd_";
export const rootKeyId = "root";

const hashOf = (secret: string) => createHash("sha256").update(secret).digest("hex");
const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

/** The public shape of a key: never the hash, never the secret. */
export function toApiKey(k: KeyRecord): ApiKey {
  return {
    id: k.id,
    name: k.name,
    permission: k.permission,
    namespaces: k.namespaces,
    expiresAt: iso(k.expiresAt),
    createdAt: iso(k.createdAt)!,
    lastUsedAt: iso(k.lastUsedAt),
  };
}

export interface NewKey {
  name: string;
  permission: Permission;
  namespaces: string[];
  expiresAt?: number | null;
}

/** Creates a key and returns it with its secret, which is shown this once and never stored. */
export async function createKey(store: Store, input: NewKey): Promise<{ key: KeyRecord; secret: string }> {
  const secret = secretPrefix + randomBytes(24).toString("base64url");
  const key: KeyRecord = {
    id: `key_${randomBytes(8).toString("hex")}`,
    name: input.name,
    permission: input.permission,
    namespaces: input.namespaces,
    expiresAt: input.expiresAt ?? null,
    createdAt: Date.now(),
    lastUsedAt: null,
    revokedAt: null,
    hash: hashOf(secret),
  };
  await store.env.childTransaction(() => {
    store.dbs.apiKeys.putSync(key.id, key);
    store.dbs.apiKeyHashes.putSync(key.hash, key.id);
  });
  await store.flushed();
  return { key, secret };
}

/** Every key ever made, revoked ones excluded, oldest first. */
export function listKeys(store: Store): KeyRecord[] {
  return store.dbs.apiKeys
    .getRange({})
    .asArray.map((e) => e.value as KeyRecord)
    .filter((k) => k.revokedAt === null)
    .sort((a, b) => a.createdAt - b.createdAt);
}

export function getKey(store: Store, id: string): KeyRecord | undefined {
  const k = store.dbs.apiKeys.get(id) as KeyRecord | undefined;
  return k && k.revokedAt === null ? k : undefined;
}

/** Revokes a key; the next request with it gets 401. Returns false for an unknown key. */
export async function revokeKey(store: Store, id: string): Promise<boolean> {
  const done = await store.env.childTransaction(() => {
    const k = store.dbs.apiKeys.get(id) as KeyRecord | undefined;
    if (!k || k.revokedAt !== null) return false;
    store.dbs.apiKeys.putSync(id, { ...k, revokedAt: Date.now() });
    store.dbs.apiKeyHashes.removeSync(k.hash);
    return true;
  });
  await store.flushed();
  return done === true;
}

export function hasStoredKeys(store: Store): boolean {
  return store.dbs.apiKeys.getKeys({ limit: 1 }).asArray.length > 0;
}

/** The root key given by MEMD_API_KEY: all permissions, all namespaces, kept only in memory. */
export function rootKeyFromSecret(secret: string): KeyRecord {
  return {
    id: rootKeyId,
    name: "root (MEMD_API_KEY)",
    permission: "admin",
    namespaces: ["*"],
    expiresAt: null,
    createdAt: 0,
    lastUsedAt: null,
    revokedAt: null,
    hash: hashOf(secret),
  };
}

const lastUsedWrites = new Map<string, number>();

/**
 * Finds the key for a bearer secret, or throws 401. The hash is looked up, then compared in
 * constant time. `lastUsedAt` is written at most once a minute per key, off the request path.
 */
export function authenticate(store: Store, root: KeyRecord | undefined, secret: string, now = Date.now()): KeyRecord {
  const hash = hashOf(secret);
  let key: KeyRecord | undefined;
  if (root && sameHash(root.hash, hash)) key = root;
  else {
    const id = store.dbs.apiKeyHashes.get(hash) as string | undefined;
    const found = id === undefined ? undefined : (store.dbs.apiKeys.get(id) as KeyRecord | undefined);
    if (found && sameHash(found.hash, hash)) key = found;
  }
  if (!key || key.revokedAt !== null) throw new ApiError("unauthorized", "unknown or revoked API key");
  if (key.expiresAt !== null && key.expiresAt <= now) throw new ApiError("unauthorized", "the API key has expired");
  if (key !== root && now - (lastUsedWrites.get(key.id) ?? 0) > 60_000) {
    lastUsedWrites.set(key.id, now);
    const id = key.id;
    store.env
      .transaction(() => {
        const k = store.dbs.apiKeys.get(id) as KeyRecord | undefined;
        if (k) store.dbs.apiKeys.putSync(id, { ...k, lastUsedAt: now });
      })
      .catch(() => {});
  }
  return key;
}

function sameHash(a: string, b: string) {
  return a.length === b.length && timingSafeEqual(Buffer.from(a), Buffer.from(b));
}

/** Whether a key's permission includes `needed`. */
export const permits = (key: KeyRecord, needed: Permission) =>
  permissions.indexOf(key.permission) >= permissions.indexOf(needed);

/** Whether a key's namespace patterns cover `namespace`: `*`, an exact name, or `prefix/*`. */
export function covers(key: KeyRecord, namespace: string): boolean {
  return key.namespaces.some((p) =>
    p === "*" ? true : p.endsWith("/*") ? namespace.startsWith(p.slice(0, -1)) : p === namespace,
  );
}

/** Throws 403 unless the key may act on `namespace`. */
export function requireNamespace(key: KeyRecord, namespace: string) {
  if (!covers(key, namespace)) throw new ApiError("forbidden", `this key does not cover namespace "${namespace}"`);
}
