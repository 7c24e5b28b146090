import { t } from "elysia";
import { invalidField } from "./errors";

/**
 * A `limit` query parameter. Query strings carry text, and Elysia's numeric coercion loses the
 * field name in its errors, so the schema only checks the shape and `queryLimit` the range.
 */
export const LimitParam = (max: number, def: number) =>
  t.String({ pattern: "^[0-9]{1,7}$", description: `1 to ${max}; default ${def}` });

/** Reads a `limit` query parameter, or throws a 400 naming it. */
export function queryLimit(raw: string | undefined, max: number, def: number): number {
  if (raw === undefined) return def;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1 || n > max) throw invalidField("limit", `must be a whole number from 1 to ${max}`);
  return n;
}
