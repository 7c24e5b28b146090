import { ValueErrorType } from "@sinclair/typebox/errors";
import type { ErrorDetail } from "../wire/errors";
import { lowerUuidPattern, noControlPattern, tagPattern, uuidPattern } from "../wire/schemas";
import { limitPattern } from "./query";

/** What TypeBox reports per failed check (a ValueError); only the parts we read. */
export interface FailedCheck {
  type: number;
  path?: string;
  value?: unknown;
  schema?: Record<string, unknown>;
}

const range = (min: unknown, max: unknown) =>
  typeof min === "number" && typeof max === "number"
    ? `from ${min} to ${max}`
    : typeof max === "number"
      ? `of at most ${max}`
      : typeof min === "number"
        ? `of at least ${min}`
        : "";

function chars(s: Record<string, unknown>): string {
  const min = s.minLength as number | undefined;
  const max = s.maxLength as number | undefined;
  if (min !== undefined && max !== undefined) return ` of ${min} to ${max} characters`;
  if (max !== undefined) return ` of at most ${max} characters`;
  if (min === 1) return " that is not empty";
  return "";
}

/**
 * What a value must be, in words, from its schema: "must be a string of 1 to 128 characters
 * without control characters", "must be a whole number from 1 to 1000". Never a pattern and
 * never the validator's own wording.
 */
export function describeSchema(s: Record<string, unknown> | undefined): string {
  if (!s) return "is not valid";
  const literals = (s.anyOf as Record<string, unknown>[] | undefined)?.map((m) => m.const);
  if (literals && literals.length > 0 && literals.every((l) => typeof l === "string"))
    return `must be one of ${literals.join(", ")}`;
  const [one, many] = (s.anyOf as Record<string, unknown>[] | undefined) ?? [];
  // A value or a list of them (a webhook's namespaces): both in words.
  if (many?.type === "array" && (s.anyOf as unknown[]).length === 2 && Bun.deepEquals(many.items, one))
    return `${describeSchema(one)}, or ${describeSchema(many).replace(/^must be /, "")}`;
  if (s.anyOf) {
    // Elysia's numeric coercion: a union of a number and a numeric string.
    const num = (s.anyOf as Record<string, unknown>[]).find((m) => m.type === "integer" || m.type === "number");
    return describeSchema(num ?? (s.anyOf as Record<string, unknown>[])[0]);
  }
  switch (s.type) {
    case "string": {
      if (s.pattern === noControlPattern) return `must be a string${chars(s)} without control characters`;
      if (s.pattern === tagPattern) return `must be a string${chars(s)}, not blank, without control characters`;
      if (s.pattern === uuidPattern || s.pattern === lowerUuidPattern) return "must be a UUID";
      if (s.pattern === "\\S") return "must be a string that is not blank";
      // Times are strings the handler parses; a schema failure (a number, say) gets the same words.
      if (String(s.description ?? "").startsWith("ISO 8601")) return "must be an ISO 8601 timestamp";
      if (s.pattern === limitPattern) {
        const max = /^1 to (\d+)/.exec(String(s.description ?? ""))?.[1];
        return `must be a whole number from 1 to ${max ?? "1000"}`;
      }
      return `must be a string${chars(s)}`;
    }
    case "integer":
      return `must be a whole number ${range(s.minimum, s.maximum)}`.trimEnd();
    case "number":
      if (s.exclusiveMinimum === 0)
        return `must be a number greater than 0${typeof s.maximum === "number" ? ` and at most ${s.maximum}` : ""}`;
      return `must be a number ${range(s.minimum, s.maximum)}`.trimEnd();
    case "boolean":
      return "must be true or false";
    case "array": {
      const items = s.items as Record<string, unknown> | undefined;
      const of =
        items?.type === "string"
          ? ` strings${chars(items)}${items.pattern === noControlPattern ? " without control characters" : items.pattern === tagPattern ? ", not blank, without control characters" : ""}`
          : " items";
      const n = s.maxItems as number | undefined;
      const min = s.minItems as number | undefined;
      if (n !== undefined && min) return `must be a list of ${min} to ${n}${of}`;
      return n === undefined ? `must be a list of${of}` : `must be a list of at most ${n}${of}`;
    }
    case "object":
      return "must be a JSON object";
    case "null":
      return "must be null";
    default:
      return "is not valid";
  }
}

/** `/tags/2` → `tags[2]`; the body itself → `(body)`. */
export function fieldOf(path: string | undefined): string {
  return (
    (path ?? "")
      .split("/")
      .filter(Boolean)
      .map((p) => (/^\d+$/.test(p) ? `[${p}]` : `.${p}`))
      .join("")
      .replace(/^\./, "") || "(body)"
  );
}

/**
 * One detail per field, in words, from the failed checks of one validation: the first failure
 * of a field wins, and a field inside one already reported (tags[0] inside tags) is left out.
 */
export function detailsInWords(checks: Iterable<FailedCheck>, max = 20): ErrorDetail[] {
  const details: ErrorDetail[] = [];
  const seen: string[] = [];
  for (const c of checks) {
    const field = fieldOf(c.path);
    if (seen.some((f) => field === f || field.startsWith(`${f}.`) || field.startsWith(`${f}[`))) continue;
    seen.push(field);
    const message =
      c.type === ValueErrorType.ObjectAdditionalProperties
        ? "is not a known field"
        : c.value === undefined && field !== "(body)"
          ? "is required"
          : describeSchema(c.schema);
    details.push({ field, message });
    if (details.length >= max) break;
  }
  return details;
}
