/**
 * Time on the wire, in one place: memd writes ISO 8601 UTC with milliseconds, and reads one
 * strict ISO 8601 form everywhere (`since`, `expiresAt`).
 */
import { invalidField } from "./errors";

/** Milliseconds since the epoch as memd writes times: `2026-01-31T12:00:00.000Z`. */
export const isoTime = (ms: number): string => new Date(ms).toISOString();

const shape =
  /^(\d{4})-(\d{2})-(\d{2})(?:[Tt ](\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d{1,9}))?)?(Z|z|[+-]\d{2}(?::?\d{2})?)?)?$/;

const daysIn = (year: number, month: number) =>
  month === 2
    ? year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0)
      ? 29
      : 28
    : [4, 6, 9, 11].includes(month)
      ? 30
      : 31;

/**
 * Parses an ISO 8601 date (`2026-01-31`) or date-time (`2026-01-31T12:00`, `…:00Z`,
 * `…:00.123+02:00`; no zone means UTC) to milliseconds. Returns undefined for anything else,
 * including dates that do not exist (`2026-02-30`, `25:00`): nothing rolls over. Fractions
 * beyond milliseconds are cut, never rounded up into the next millisecond.
 */
export function parseIsoTime(text: string): number | undefined {
  const m = shape.exec(text);
  if (!m) return undefined;
  const [year, month, day] = [Number(m[1]), Number(m[2]), Number(m[3])];
  const [hour, minute, second] = [Number(m[4] ?? 0), Number(m[5] ?? 0), Number(m[6] ?? 0)];
  if (month < 1 || month > 12 || day < 1 || day > daysIn(year, month)) return undefined;
  if (hour > 23 || minute > 59 || second > 59) return undefined;
  const ms = m[7] ? Number(m[7].slice(0, 3).padEnd(3, "0")) : 0;
  let offsetMin = 0;
  const zone = m[8];
  if (zone && zone !== "Z" && zone !== "z") {
    const h = Number(zone.slice(1, 3));
    const mm = Number(zone.slice(3).replace(":", "") || 0);
    if (h > 23 || mm > 59) return undefined;
    offsetMin = (zone[0] === "-" ? -1 : 1) * (h * 60 + mm);
  }
  const utc = Date.UTC(year, month - 1, day, hour, minute, second, ms);
  // Date.UTC maps years 0-99 to 1900-1999; set the year explicitly.
  const d = new Date(utc);
  d.setUTCFullYear(year);
  return d.getTime() - offsetMin * 60_000;
}

/** How far ahead of this server's clock an `observedAt` may be (a client's clock skew): 5 minutes. */
export const observedSkewMs = 5 * 60_000;

/** The shape of an ISO 8601 date or time, for schemas (the handler checks the rest with parseIsoTime). */
export const isoShapePattern = "^\\d{4}-\\d{2}-\\d{2}";

/**
 * Reads an ISO 8601 instant given in `field`, or throws a 400 naming it; undefined stays undefined.
 * `field` names where it came from (e.g. `asOf`, `observedAt`).
 */
export function instantField(field: string, text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  const ms = parseIsoTime(text);
  if (ms === undefined) throw invalidField(field, "must be an ISO 8601 timestamp, e.g. 2026-03-01T12:00:00Z");
  return ms;
}

/**
 * Reads `asOf`: an instant not after `now`, nor after `newestMs` when that is later (what comes
 * after both is not known yet). The event clock hands out a millisecond per event, so a bulk
 * change stamps events ahead of the wall clock: an instant up to the newest of them is known.
 */
export function asOfField(text: string | undefined, now = Date.now(), newestMs = now): number | undefined {
  const ms = instantField("asOf", text);
  if (ms !== undefined && ms > Math.max(now, newestMs))
    throw invalidField("asOf", "is in the future; memd answers only what it knew up to now");
  return ms;
}

/**
 * Reads an `observedAt`: not before 1970 and not in the future (up to observedSkewMs of clock
 * skew is taken as it is).
 */
export function observedAtField(text: string | undefined, now = Date.now(), field = "observedAt"): number | undefined {
  const ms = instantField(field, text);
  if (ms === undefined) return undefined;
  if (ms < 0) throw invalidField(field, "must not be before 1970-01-01T00:00:00Z");
  if (ms > now + observedSkewMs)
    throw invalidField(
      field,
      "is in the future: a fact cannot have been observed yet (5 minutes of clock skew are allowed)",
    );
  return ms;
}
