// What both backends keep of an entity's newest memories in memory for list reads (lmdb/ and
// postgres/entity-lists.ts): the context block without a query reads an entity's newest 1,000
// (up to 2,000) memories on every call, and reading them from the database is most of its cost.
import type { MemoryRecord } from "./records";

/** Bounds of what is kept: the copies hold records (with their content), so they are few. */
export const entityLists = {
  /** An entity read with fewer than this many entries is not kept (reading it is cheap). */
  minEntries: 256,
  /** At most this many of an entity's newest entries are kept; older ones are read from the database. */
  maxEntries: 4096,
  /**
   * At most this many entries, and about this many bytes (recordBytes), in all the copies of a
   * process; the least recently read go first, and a copy stops growing at the bytes.
   */
  totalEntries: 16_384,
  totalBytes: 32 * 1024 * 1024,
  /** More changes than this since a copy was read (LMDB: events; PostgreSQL: memories they name): read again, not followed. */
  maxCatchUp: 512,
};

/** Freezes a record and what it holds (tags, metadata): one object is handed to every read. */
export function deepFreeze<T>(o: T): T {
  if (typeof o === "object" && o !== null && !Object.isFrozen(o)) {
    Object.freeze(o);
    for (const v of Object.values(o)) deepFreeze(v);
  }
  return o;
}

/**
 * About what a record held in memory costs, in bytes: its strings at two bytes a character (as
 * JavaScript may hold them), and about 300 for its fields and the copy's own bookkeeping.
 */
export function recordBytes(r: MemoryRecord | undefined): number {
  if (!r) return 64;
  let n = 300 + 2 * (r.id.length + r.content.length + (r.source?.length ?? 0) + (r.key?.length ?? 0));
  if (r.tags) for (const t of r.tags) n += 32 + 2 * t.length;
  if (r.metadata) n += 2 * JSON.stringify(r.metadata).length;
  return n;
}
