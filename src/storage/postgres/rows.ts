// PostgreSQL rows and memd's records, both ways. Each table's columns are its record's fields
// (storage/records.ts), in the same order, named in snake_case: one field table per record,
// read from its schema, drives every mapping, so a field added to a record is a column here
// without a second list to keep in step.
import { Kind, OptionalKind, type TObject, type TSchema } from "@sinclair/typebox";
import { ErasureRecord, EventRecord, KeyRecord, MemoryRecord } from "../records";

export type Row = Record<string, unknown>;
/** `json` columns come back as their text. */
export const json = <T>(v: unknown): T => (typeof v === "string" ? JSON.parse(v) : v) as T;

/** One field of a record and its column: how its value is kept (numbers come back from bigint as text; arrays and objects are `json`). */
interface Column {
  field: string;
  column: string;
  kind: "value" | "number" | "json";
  /** Optional in the record: no key when the column is NULL. */
  optional: boolean;
  /** May be null in the record: null when the column is NULL. */
  nullable: boolean;
}

const snakeCase = (field: string) => field.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);

/** The columns of a record's table, in the record's field order (`except`: fields kept elsewhere, such as a serial). */
export function columnsOf(record: TObject, except: readonly string[] = []): Column[] {
  return Object.entries(record.properties as Record<string, TSchema>)
    .filter(([field]) => !except.includes(field))
    .map(([field, schema]) => {
      const members: TSchema[] = schema[Kind] === "Union" ? schema.anyOf : [schema];
      const value = members.find((m) => m[Kind] !== "Null")!;
      const kind = ["Integer", "Number"].includes(value[Kind])
        ? "number"
        : ["Array", "Record", "Object"].includes(value[Kind])
          ? "json"
          : "value";
      return {
        field,
        column: snakeCase(field),
        kind,
        optional: schema[OptionalKind] === "Optional",
        nullable: members.length > 1 && members.some((m) => m[Kind] === "Null"),
      };
    });
}

const fromColumn = (c: Column, v: unknown) => (c.kind === "number" ? Number(v) : c.kind === "json" ? json(v) : v);

/** A row of `columns` as its record: NULL is an absent optional field, or null where the record allows it. */
function reader<T>(columns: Column[]): (r: Row) => T {
  return (r) => {
    const out: Row = {};
    for (const c of columns) {
      const v = r[c.column];
      if (v === null || v === undefined) {
        if (c.optional) continue;
        if (c.nullable) {
          out[c.field] = c.kind === "value" ? v : null;
          continue;
        }
      }
      out[c.field] = fromColumn(c, v);
    }
    return out as T;
  };
}

/** A record as a row for the driver's INSERT helper: absent fields are NULL, json fields their text. */
function writer<T>(columns: Column[]): (record: T) => Row {
  return (record) => {
    const out: Row = {};
    for (const c of columns) {
      const v = (record as Row)[c.field];
      out[c.column] = c.kind === "json" ? (v === undefined || v === null ? null : JSON.stringify(v)) : (v ?? null);
    }
    return out;
  };
}

/**
 * A record as a row of json_populate_recordset(NULL::<table>, ...), which the whole batch is
 * sent as (one JSON text): absent fields are left out, so their columns are NULL.
 */
function jsonWriter<T>(columns: Column[]): (record: T) => Row {
  return (record) => {
    const out: Row = {};
    for (const c of columns) out[c.column] = (record as Row)[c.field];
    return out;
  };
}

/** Each table's columns: memories, events (seq is the table's serial, given apart on import), api_keys, erasures. */
export const columns = {
  memories: columnsOf(MemoryRecord),
  events: columnsOf(EventRecord),
  eventsWithoutSeq: columnsOf(EventRecord, ["seq"]),
  apiKeys: columnsOf(KeyRecord),
  erasures: columnsOf(ErasureRecord),
};

/** A table's column names, as an INSERT names them (a column added later takes its default). */
export const columnList = (cs: Column[]) => cs.map((c) => c.column).join(", ");

export const memoryOf = reader<MemoryRecord>(columns.memories);
export const memoryRow = writer<MemoryRecord>(columns.memories);
export const memoryJson = jsonWriter<MemoryRecord>(columns.memories);
export const eventOf = reader<EventRecord>(columns.events);
export const eventRow = writer<Omit<EventRecord, "seq">>(columns.eventsWithoutSeq);
export const eventJson = jsonWriter<EventRecord>(columns.events);
export const keyOf = reader<KeyRecord>(columns.apiKeys);
export const keyRow = writer<KeyRecord>(columns.apiKeys);
export const erasureOf = reader<ErasureRecord>(columns.erasures);
export const erasureRow = writer<ErasureRecord>(columns.erasures);
