import { t } from "elysia";
import { ApiError, invalidField } from "../wire/errors";
import { hasControl } from "../wire/schemas";

/** A whole number from 1, as query text (its largest value is checked by queryLimit). */
export const limitPattern = "^[1-9][0-9]{0,6}$";

/**
 * A `limit` query parameter. Query strings carry text, and Elysia's numeric coercion loses the
 * field name in its errors, so the schema only checks the shape and `queryLimit` the range.
 */
export const LimitParam = (max: number, def: number) =>
  t.String({ pattern: limitPattern, description: `1 to ${max}; default ${def}` });

/**
 * Refuses query strings that would otherwise be read loosely: an invalid percent escape
 * (`%FF%FE`, `a%80`, `%C3%28`) is a 400 naming the parameter instead of being taken literally;
 * a decoded value obeys the rule of body fields (no control characters); and a parameter given
 * twice is a 400, not "the last one wins", unless it is one of `repeatable` (a list such as
 * `tag`). The request pipeline calls it after authentication (401 comes first); `q` is the index
 * of the URL's "?" if known.
 */
export function checkQueryString(url: string, q = url.indexOf("?"), repeatable: readonly string[] = []) {
  if (q === -1 || q === url.length - 1) return;
  const hash = url.indexOf("#", q);
  const seen = new Set<string>();
  for (const part of url.slice(q + 1, hash === -1 ? undefined : hash).split("&")) {
    if (part === "") continue;
    const eq = part.indexOf("=");
    const rawName = eq === -1 ? part : part.slice(0, eq);
    const name = decode(rawName);
    if (name === undefined)
      throw new ApiError("invalid_request", "a query parameter name has an invalid percent escape", [
        { field: "(query)", message: "has an invalid percent escape" },
      ]);
    const value = decode(eq === -1 ? "" : part.slice(eq + 1));
    if (value === undefined)
      throw invalidField(name, "has an invalid percent escape (it must encode UTF-8, e.g. %C3%A9 for é)");
    if (hasControl(name) || hasControl(value)) throw invalidField(name, "must not hold control characters");
    if (seen.has(name) && !repeatable.includes(name)) throw invalidField(name, "may be given only once");
    seen.add(name);
  }
}

function decode(s: string): string | undefined {
  try {
    return decodeURIComponent(s.replace(/\+/g, " "));
  } catch {
    return undefined;
  }
}

/** Reads a `limit` query parameter, or throws a 400 naming it. */
export function queryLimit(raw: string | undefined, max: number, def: number): number {
  if (raw === undefined) return def;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1 || n > max) throw invalidField("limit", `must be a whole number from 1 to ${max}`);
  return n;
}
