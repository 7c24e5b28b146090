import type { TSchema } from "@sinclair/typebox";
import { t } from "elysia";
import { limits } from "../config/limits";
import { isUuid, uuidPattern } from "../storage/records";

/**
 * The name rule, in one place: names (namespaces, entities, categories, key names) hold no
 * control characters, that is Unicode's Cc class: U+0000 to U+001F and U+007F to U+009F.
 * The schema pattern and `hasControl` are the same rule (TypeBox compiles patterns without the
 * `u` flag, so the pattern spells the class out).
 */
export const noControlPattern = "^[^\\u0000-\\u001f\\u007f-\\u009f]+$";
export const hasControl = (s: string) => /\p{Cc}/u.test(s);

/**
 * The tag rule, in one place (stores, edits, imports, and the tag filters of lists and searches):
 * 1 to 64 characters, no control characters, and not blank. A filter cannot name a tag that a
 * store would refuse.
 */
export const tagPattern = "^(?=[\\s\\S]*\\S)[^\\u0000-\\u001f\\u007f-\\u009f]+$";

/** A string of `min` to `max` characters without control characters. */
export const NoControlText = (min: number, max: number, options: { description?: string } = {}) =>
  t.String({ minLength: min, maxLength: max, pattern: noControlPattern, ...options });

/** A namespace or entity name. */
export const Name = NoControlText(1, limits.nameChars);

/** Shapes shared by several features. A UUID: the pattern of storage/records.ts. */
export const Uuid = t.String({ pattern: uuidPattern });
export { isUuid };

/** An ISO 8601 UTC timestamp as memd writes them; documented, not checked (answers only). */
export const Timestamp = t.String({ description: "ISO 8601 UTC with milliseconds, e.g. 2026-01-31T12:00:00.000Z" });

/**
 * Documents a JSON answer in the OpenAPI document without validating it on every response:
 * answers are built by our own code from typed records, and checking them again cost a third of
 * an events request. Use as `detail: { responses: jsonAnswer(Schema) }`.
 */
export const jsonAnswer = (schema: TSchema, description = "OK") => ({
  200: { description, content: { "application/json": { schema: schema as Record<string, unknown> } } },
  default: {
    description: "An error; `code` is one of the catalogue in docs/api.md (Errors)",
    content: { "application/json": { schema: ErrorBody as Record<string, unknown> } },
  },
});

/** The body of every error answer. */
export const ErrorBody = t.Object({
  error: t.Object({
    code: t.String(),
    message: t.String(),
    details: t.Optional(t.Array(t.Object({ field: t.String(), message: t.String() }))),
  }),
});
