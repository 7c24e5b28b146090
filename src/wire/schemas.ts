import { type TLiteral, type TSchema, type TUnion, Type as t } from "@sinclair/typebox";
import { limits } from "../config/limits";

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

/**
 * One of a list of strings (`as const`), as a union of literals whose type keeps each member, so
 * that the list is written once and Elysia still infers the exact strings.
 */
export const oneOf = <const T extends readonly string[]>(values: T) =>
  t.Union(values.map((v) => t.Literal(v))) as unknown as TUnion<[...{ [K in keyof T]: TLiteral<T[K]> }]>;

/** A namespace or entity name. */
export const Name = NoControlText(1, limits.nameChars);
/** Only entities whose name starts with this text (for example every entity under "acme."). */
export const EntityPrefix = NoControlText(1, limits.nameChars, {
  description: "only entities whose name starts with this text, e.g. `users.` for `users.1` and `users.2`",
});

/** A memory's category and one of its tags: the rules every schema that takes them shares (stores, filters, the export format). */
export const Category = NoControlText(1, limits.categoryChars);
export const Tag = t.String({ minLength: 1, maxLength: limits.tagChars, pattern: tagPattern });
export const Tags = t.Array(Tag, { maxItems: limits.tags });
export const Importance = t.Number({ minimum: 0, maximum: 1 });
/** A keyed fact's key (issue 33): at most one current memory per (namespace, entity, key). */
export const MemoryKey = NoControlText(1, limits.memoryKeyChars, {
  description:
    "at most one current memory per (namespace, entity, key); a store with the key of a current memory updates it in place",
});

/**
 * A UUID's text, in one place. Memory ids are UUIDv7; requests may name them in any case (an id
 * that is not a UUID cannot exist: 404, not 400), memd writes them in lower case, and an export
 * file holds nothing else. Schemas use the patterns (Uuid below) (TypeBox's `format: "uuid"` registry is global
 * and replaced by a dependency); stored answers are scanned with uuidsIn.
 */
export const uuidText = "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}";
export const uuidPattern = `^${uuidText}$`;
export const lowerUuidPattern = `^${uuidText.replaceAll("a-fA-F", "a-f")}$`;
const uuidShape = new RegExp(uuidPattern);
export const isUuid = (s: string) => uuidShape.test(s);
/** Every UUID inside a text, lower-cased (uuidText, unanchored, is the same for SQL's regexp_matches). */
export const uuidsIn = (text: string) => (text.match(new RegExp(uuidText, "g")) ?? []).map((id) => id.toLowerCase());

/** A UUID in any case, as requests may name it. */
export const Uuid = t.String({ pattern: uuidPattern });

/** An ISO 8601 UTC timestamp as memd writes them; documented, not checked (answers only). */
export const Timestamp = t.String({ description: "ISO 8601 UTC with milliseconds, e.g. 2026-01-31T12:00:00.000Z" });

/**
 * Documents a JSON answer in the OpenAPI document without validating it on every response:
 * answers are built by our own code from typed records, and checking them again cost a third of
 * an events request. Use as `detail: { responses: jsonAnswer(Schema) }`.
 */
export const jsonAnswer = (schema: TSchema, description = "OK") => ({
  200: { description, content: { "application/json": { schema: schema as Record<string, unknown> } } },
  default: errorAnswer(),
});

/** An error answer in the OpenAPI document: every memd route's errors have this body. */
export const errorAnswer = () => ({
  description: "An error; `code` is one of the catalogue in docs/api.md (Errors)",
  content: { "application/json": { schema: ErrorBody as Record<string, unknown> } },
});

/** The body of every error answer. */
export const ErrorBody = t.Object({
  error: t.Object({
    code: t.String(),
    message: t.String(),
    details: t.Optional(t.Array(t.Object({ field: t.String(), message: t.String() }))),
  }),
});
