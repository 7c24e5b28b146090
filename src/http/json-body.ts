import { Elysia } from "elysia";
import { limits } from "../config/limits";
import { ApiError } from "./errors";

export interface JsonBodyOptions {
  /** Largest body accepted, in bytes. */
  maxBytes?: number;
  /** Deepest nesting of arrays and objects accepted. */
  maxDepth?: number;
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
export function jsonBody({ maxBytes = maxBodyBytes, maxDepth = limits.jsonDepth }: JsonBodyOptions = {}) {
  return new Elysia({ name: "json-body" }).onParse(
    { as: "global" },
    async function parseJson({ request, contentType }) {
      if (request.method === "GET" || request.method === "HEAD" || request.method === "DELETE") return;
      const type = (contentType ?? "").split(";")[0].trim().toLowerCase();
      if (type !== "application/json")
        throw new ApiError("unsupported_media_type", "send the body as JSON with Content-Type: application/json");
      const declared = Number(request.headers.get("content-length") ?? 0);
      if (declared > maxBytes) throw tooLarge(maxBytes);
      const bytes = await request.arrayBuffer();
      if (bytes.byteLength > maxBytes) throw tooLarge(maxBytes);
      let text: string;
      try {
        text = utf8.decode(bytes);
      } catch {
        throw new ApiError("invalid_request", "the body is not valid UTF-8");
      }
      // Deep nesting overflows the stack in the validator and costs seconds of CPU: refuse it first.
      if (nestingExceeds(text, maxDepth))
        throw new ApiError("invalid_request", `the body is nested deeper than ${maxDepth} levels`);
      try {
        return JSON.parse(text);
      } catch {
        throw new ApiError("invalid_request", "the body is not valid JSON");
      }
    },
  );
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
