import { randomBytes, timingSafeEqual } from "node:crypto";
import { limits } from "../config/limits";
import type { KeyStore } from "../storage/storage";
import { ApiError, invalidField } from "../wire/errors";
import { hasControl } from "../wire/schemas";
import { isoTime } from "../wire/time";
import { type ApiKey, type KeyRecord, type Permission, permissions } from "./model";

/** Secrets carry this prefix so secret scanners can spot leaked ones. */
export const secretPrefix = "memd_";
export const rootKeyId = "root";

const hashOf = (secret: string) => Bun.SHA256.hash(secret, "hex");
const iso = (ms: number | null) => (ms === null ? null : isoTime(ms));

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

/** Checks what a schema cannot: namespace patterns and an expiry in the future. Throws a 400. */
export function checkNewKey(input: NewKey, now = Date.now()) {
  if (input.name.trim() === "" || input.name.length > limits.nameChars || hasControl(input.name))
    throw invalidField("name", `must be a string of 1 to ${limits.nameChars} characters without control characters`);
  if (input.namespaces.length === 0) throw invalidField("namespaces", "needs at least one namespace pattern");
  input.namespaces.forEach((p, i) => {
    const problem = patternProblem(p);
    if (problem) throw invalidField(`namespaces[${i}]`, `"${p}" ${problem}`);
  });
  if (input.expiresAt != null && !(input.expiresAt > now)) throw invalidField("expiresAt", "must be in the future");
}

/** Creates a key and returns it with its secret, which is shown this once and never stored. */
export async function createKey(storage: KeyStore, input: NewKey): Promise<{ key: KeyRecord; secret: string }> {
  const made = await createKeyIf(storage, input, {});
  return made!;
}

/**
 * Creates a key like createKey; with `onlyIfNone`, only when the store holds no key at all
 * (the first root key), else answers undefined.
 */
export async function createKeyIf(
  storage: KeyStore,
  input: NewKey,
  options: { onlyIfNone?: boolean },
): Promise<{ key: KeyRecord; secret: string } | undefined> {
  checkNewKey(input);
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
  return (await storage.insertKey(key, options)) ? { key, secret } : undefined;
}

/** Every key ever made, revoked ones excluded, oldest first. */
export async function listKeys(storage: KeyStore): Promise<KeyRecord[]> {
  return (await storage.listKeys()).filter((k) => k.revokedAt === null).sort((a, b) => a.createdAt - b.createdAt);
}

/** A key that is not revoked, by id. */
export async function getKey(storage: KeyStore, id: string): Promise<KeyRecord | undefined> {
  const k = await storage.getKey(id);
  return k && k.revokedAt === null ? k : undefined;
}

/** Revokes a key; the next request with it gets 401. Returns false for an unknown key. */
export async function revokeKey(storage: KeyStore, id: string): Promise<boolean> {
  const done = await storage.revokeKey(id, Date.now());
  const cache = keyCaches.get(storage);
  if (cache) for (const [hash, c] of cache) if (c.key.id === id) cache.delete(hash);
  return done;
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
 * Answers without a promise when the key is the root key or cached (the request path's case);
 * a miss reads storage and answers a promise. Either way a refusal may be thrown or rejected.
 */
export function authenticate(
  storage: KeyStore,
  root: KeyRecord | undefined,
  secret: string,
  now = Date.now(),
): KeyRecord | Promise<KeyRecord> {
  const digest = Bun.SHA256.hash(secret) as Uint8Array;
  if (root && timingSafeEqual(digest, digestOf(root))) return admitKey(storage, root, root, now);
  const hash = Buffer.from(digest.buffer, digest.byteOffset, digest.byteLength).toString("hex");
  const hit = cachedKey(storage, hash, now);
  if (hit) return admitKey(storage, root, hit, now);
  return readKeyByHash(storage, hash, now).then((found) => admitKey(storage, root, found, now));
}

/**
 * The root key's digest as bytes, made once. Stored keys are found by the hash itself (in the
 * cache or the store), so only the root key is compared, in constant time.
 */
const rootDigests = new WeakMap<KeyRecord, Buffer>();
function digestOf(root: KeyRecord): Buffer {
  let d = rootDigests.get(root);
  if (!d) {
    d = Buffer.from(root.hash, "hex");
    rootDigests.set(root, d);
  }
  return d;
}

/** Why a key found (or not) for a secret does not admit a request now, if it does not. */
function keyRefusal(key: KeyRecord | undefined, now: number): string | undefined {
  if (!key || key.revokedAt !== null) return "unknown or revoked API key";
  if (key.expiresAt !== null && key.expiresAt <= now) return "the API key has expired";
  return undefined;
}

function admitKey(storage: KeyStore, root: KeyRecord | undefined, key: KeyRecord | undefined, now: number): KeyRecord {
  const refusal = keyRefusal(key, now);
  if (refusal !== undefined || !key) throw new ApiError("unauthorized", refusal ?? "unknown or revoked API key");
  if (key !== root && now - (lastUsedWrites.get(key.id) ?? 0) > 60_000) {
    lastUsedWrites.set(key.id, now);
    storage.touchKey(key.id, now).catch(() => {});
  }
  return key;
}

/**
 * How long a key record read from storage is trusted (half the 1 s promise, for margin). A key revoked or expiring in another
 * process (`memd keys revoke`) or replica is refused within this time; one revoked through this
 * process at once. Keys not found are never cached, so a key made elsewhere works at once.
 */
export const KEY_CACHE_MS = 500;
const MAX_CACHED_KEYS = 10_000;
const keyCaches = new WeakMap<KeyStore, Map<string, { key: KeyRecord; at: number }>>();

function cacheOf(storage: KeyStore) {
  let cache = keyCaches.get(storage);
  if (!cache) {
    cache = new Map();
    keyCaches.set(storage, cache);
  }
  return cache;
}

/** A key record read from storage less than KEY_CACHE_MS ago, if any. */
function cachedKey(storage: KeyStore, hash: string, now: number): KeyRecord | undefined {
  const hit = keyCaches.get(storage)?.get(hash);
  return hit && now - hit.at < KEY_CACHE_MS && now >= hit.at ? hit.key : undefined;
}

async function readKeyByHash(storage: KeyStore, hash: string, now: number): Promise<KeyRecord | undefined> {
  const key = await storage.keyByHash(hash);
  const cache = cacheOf(storage);
  cache.delete(hash);
  if (key) {
    if (cache.size >= MAX_CACHED_KEYS) cache.delete(cache.keys().next().value!);
    cache.set(hash, { key, at: now });
  }
  return key;
}

/**
 * Whether a key that authenticated a long request (an event stream) is still good now: not
 * revoked, not expired. Read as a request reads it, through the key cache, so a revocation made
 * elsewhere ends the stream within a second. The root key lives in the config, not in storage.
 */
export async function stillValid(storage: KeyStore, key: KeyRecord, now = Date.now()): Promise<boolean> {
  if (key.id === rootKeyId) return keyRefusal(key, now) === undefined;
  const found = cachedKey(storage, key.hash, now) ?? (await readKeyByHash(storage, key.hash, now));
  return keyRefusal(found, now) === undefined;
}

/** Whether a key's permission includes `needed`. */
export const permits = (key: KeyRecord, needed: Permission) =>
  permissions.indexOf(key.permission) >= permissions.indexOf(needed);

/**
 * Whether a key's namespace patterns cover `namespace`: `*` covers all; `team-a/*` covers every
 * name that starts with `team-a/` (so `team-a/x` and `team-a/x/y`, but neither `team-a` nor
 * `team-ab`); any other pattern covers exactly that name.
 */
export function covers(key: KeyRecord, namespace: string): boolean {
  return key.namespaces.some((p) =>
    p === "*" ? true : p.endsWith("/*") ? namespace.startsWith(p.slice(0, -1)) : p === namespace,
  );
}

/**
 * Whether everything `pattern` could match is covered by the key, so an admin key limited to
 * some namespaces cannot create, see or revoke keys that reach beyond them.
 */
export function coversPattern(key: KeyRecord, pattern: string): boolean {
  if (!pattern.endsWith("*")) return covers(key, pattern);
  // A pattern is inside `*`, or inside a wider prefix: `team-a/x/*` is inside `team-a/*`.
  return key.namespaces.some(
    (p) => p === "*" || (pattern !== "*" && p.endsWith("/*") && pattern.startsWith(p.slice(0, -1))),
  );
}

/** The first of `patterns` the key does not cover all of (a webhook's filter), or undefined. */
export const patternOutside = (key: KeyRecord, patterns: readonly string[]) =>
  patterns.find((p) => !coversPattern(key, p));

/** Whether every namespace of `target` lies within the key's own. */
export const coversKey = (key: KeyRecord, target: KeyRecord) => target.namespaces.every((p) => coversPattern(key, p));

/** Why a namespace pattern is invalid, or undefined: `*`, an exact name, or `prefix/*`; no other `*`. */
export function patternProblem(pattern: string): string | undefined {
  if (pattern === "*") return undefined;
  const body = pattern.endsWith("/*") ? pattern.slice(0, -2) : pattern;
  if (body === "") return "needs a name before /*";
  if (body.includes("*")) return "may hold * only as the whole pattern or as a final /*";
  if (body.length > limits.nameChars) return `is longer than ${limits.nameChars} characters`;
  if (hasControl(pattern)) return "may not hold control characters";
  return undefined;
}

/** Throws 403 unless the key may act on `namespace`. */
export function requireNamespace(key: KeyRecord, namespace: string) {
  if (!covers(key, namespace)) throw new ApiError("forbidden", `this key does not cover namespace "${namespace}"`);
}
