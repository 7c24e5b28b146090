import { Elysia } from "elysia";
import { limits } from "../config/limits";
import { ApiError, invalidField } from "../wire/errors";

export interface JsonBodyOptions {
  /** Largest body accepted, in bytes. */
  maxBytes?: number;
  /** Deepest nesting of arrays and objects accepted. */
  maxDepth?: number;
  /** Top-level fields holding free-form objects (see refuseDangerousKeys). */
  freeForm?: readonly string[];
  /** POST paths that take no body (an action such as rotating a secret): sent without one, nothing is parsed. */
  bodylessPost?: RegExp;
}

const utf8 = new TextDecoder("utf-8", { fatal: true });

/** The largest request body memd accepts, in bytes: the one limit (413 payload_too_large above it). */
export const maxBodyBytes = limits.bodyBytes;

/**
 * Where the socket layer (Bun's maxRequestBodySize) cuts a body off. It is derived from
 * maxBodyBytes and sits above it only so that bodies just over the limit reach our parser and
 * get the error body; Bun's own 413 has none.
 */
export const socketBodyLimit = 2 * maxBodyBytes;

/**
 * Parses request bodies as strict JSON: `application/json` only (415 otherwise), at most
 * `maxBytes` (413), valid UTF-8 and valid JSON nested at most `maxDepth` deep (400).
 */
export function jsonBody({
  maxBytes = maxBodyBytes,
  maxDepth = limits.jsonDepth,
  freeForm = [],
  bodylessPost,
}: JsonBodyOptions = {}) {
  return new Elysia({ name: "json-body" }).onParse(
    { as: "global" },
    async function parseJson({ request, contentType }) {
      if (takesNoBody(request.method)) {
        if (hasBody(request)) throw noBodyError(request.method);
        return;
      }
      if (
        bodylessPost &&
        request.method === "POST" &&
        !hasBody(request) &&
        bodylessPost.test(new URL(request.url).pathname)
      )
        return;
      // An edit without a body changes nothing: the same 400 with or without a media type.
      if (request.method === "PATCH" && !hasBody(request))
        throw new ApiError("invalid_request", "the body is empty; send the fields to change as a JSON object");
      // Elysia leaves contentType empty when there is no body: the header still says what was meant.
      if (!isJsonType(contentType || request.headers.get("content-type")))
        throw new ApiError("unsupported_media_type", "send the body as JSON with Content-Type: application/json");
      const declared = Number(request.headers.get("content-length") ?? 0);
      if (declared > maxBytes) throw tooLarge(maxBytes);
      return parseJsonBody(await request.arrayBuffer(), { maxBytes, maxDepth, freeForm });
    },
  );
}

/** A body's bytes as strict JSON (the checks of jsonBody after the media type), or a 413/400 thrown. */
export function parseJsonBody(
  bytes: ArrayBuffer | Uint8Array,
  { maxBytes = maxBodyBytes, maxDepth = limits.jsonDepth, freeForm = [] }: JsonBodyOptions = {},
): unknown {
  if (bytes.byteLength > maxBytes) throw tooLarge(maxBytes);
  if (bytes.byteLength === 0) throw new ApiError("invalid_request", "the body is empty; send a JSON object");
  let text: string;
  try {
    text = utf8.decode(bytes);
  } catch {
    throw new ApiError("invalid_request", "the body is not valid UTF-8");
  }
  // Deep nesting overflows the stack in the validator and costs seconds of CPU: refuse it first.
  if (nestingExceeds(text, maxDepth))
    throw new ApiError("invalid_request", `the body is nested deeper than ${maxDepth} levels`);
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new ApiError("invalid_request", "the body is not valid JSON");
  }
  refuseDangerousKeys(value, freeForm);
  // Only a \u escape can put U+0000 or a lone surrogate into a string of valid UTF-8 JSON.
  return text.includes("\\u") ? wellFormed(value, "") : value;
}

/**
 * Refuses U+0000 in any string of a body (400 naming its path): PostgreSQL text cannot hold it,
 * and both backends must answer alike. Replaces lone surrogates with U+FFFD, as the two backends
 * would otherwise store them differently (one or three replacement characters).
 */
function wellFormed(value: unknown, path: string): unknown {
  if (typeof value === "string") {
    if (value.includes("\u0000")) throw invalidField(path || "(body)", "must not contain the character U+0000");
    return value.isWellFormed() ? value : value.toWellFormed();
  }
  if (value === null || typeof value !== "object") return value;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) value[i] = wellFormed(value[i], `${path}[${i}]`);
    return value;
  }
  const o = value as Record<string, unknown>;
  for (const key of Object.keys(o)) {
    const at = path ? `${path}.${key}` : key;
    const clean = wellFormed(key, at) as string;
    const v = wellFormed(o[key], at);
    if (clean !== key) delete o[key];
    o[clean] = v;
  }
  return value;
}

/** Whether a Content-Type names JSON, as jsonBody accepts it (parameters such as charset aside). */
export const isJsonType = (contentType: string | null) =>
  contentType === "application/json" || (contentType ?? "").split(";")[0].trim().toLowerCase() === "application/json";

const takesNoBody = (method: string) => method === "GET" || method === "HEAD" || method === "DELETE";
const hasBody = (r: Request) =>
  Number(r.headers.get("content-length") ?? 0) > 0 || r.headers.get("transfer-encoding") !== null;
const noBodyError = (method: string) =>
  new ApiError("invalid_request", `${method} takes no body; send the request without one`);

/**
 * Refuses a body on GET, HEAD and DELETE: no route of those methods reads one, and Elysia's
 * default parser would otherwise take anything (a nested 200 KB body, text/plain). The request
 * pipeline calls it after authentication (401 comes first).
 */
export function refuseBody(request: Request) {
  if (takesNoBody(request.method) && hasBody(request)) throw noBodyError(request.method);
}

/**
 * Keys that become an object's prototype or shadow its machinery when a parsed body is merged
 * into another object (Elysia applies schema defaults with Object.assign): a "__proto__" key
 * would turn into the prototype of the request, smuggling fields past the unknown-field check.
 */
const dangerousKeys = new Set(["__proto__", "constructor", "prototype"]);

/**
 * Throws a 400 naming the path of the first dangerous key in `value`. Inside the fields whose
 * dotted paths are listed in `freeForm` (for memd: `metadata`, and `params.arguments.metadata` of
 * an MCP call) "constructor" and "prototype" are plain keys and round-trip; "__proto__" is
 * refused everywhere, because it cannot round-trip through the store's encoding.
 */
export function refuseDangerousKeys(value: unknown, freeForm: readonly string[] = [], path = "", free = false) {
  if (value === null || typeof value !== "object") return;
  if (Array.isArray(value)) {
    value.forEach((v, i) => {
      refuseDangerousKeys(v, freeForm, `${path}[${i}]`, free);
    });
    return;
  }
  for (const key of Object.keys(value)) {
    const at = path ? `${path}.${key}` : key;
    if (key === "__proto__" || (!free && dangerousKeys.has(key)))
      throw new ApiError("invalid_request", `${at}: "${key}" is not allowed as a key`, [
        { field: at, message: `"${key}" is not allowed as a key` },
      ]);
    refuseDangerousKeys((value as Record<string, unknown>)[key], freeForm, at, free || freeForm.includes(at));
  }
}

const tooLarge = (max: number) => new ApiError("payload_too_large", `the body is larger than ${max} bytes`);

/** Whether arrays and objects in JSON `text` nest deeper than `max` (brackets inside strings do not count). */
function nestingExceeds(text: string, max: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 92)
        i++; // backslash: skip the escaped character
      else if (c === 34) inString = false;
    } else if (c === 34) inString = true;
    else if (c === 123 || c === 91) {
      if (++depth > max) return true;
    } else if (c === 125 || c === 93) depth--;
  }
  return false;
}
