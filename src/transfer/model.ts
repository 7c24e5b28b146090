// The export format: JSON Lines, a header line then one record per line. Records are the
// storage records as they are (times in milliseconds since the epoch, ids kept), each with a
// `type`. Written by `memd export` and GET /v1/export, read by `memd import`.
import { type TObject, Type } from "@sinclair/typebox";
import { TypeCompiler } from "@sinclair/typebox/compiler";
import { recordSchemas } from "../storage/records";

/**
 * The version of the export format this memd writes. 2: memories' observedAt, and events that
 * carry the memory's state after them (importance, tags, metadata, expiresAt, observedAt,
 * oldObservedAt). An import reads these versions and refuses others; a format 1 file has none of
 * the new fields, and its records then read as records written before they existed (docs/time.md).
 */
export const EXPORT_FORMAT = 2;
export const IMPORT_FORMATS: readonly number[] = [1, 2];

export const Header = Type.Object({
  type: Type.Literal("header"),
  format: Type.Integer(),
  memd: Type.String(),
  exportedAt: Type.String(),
  namespaces: Type.Union([Type.Array(Type.String()), Type.Null()]),
  keys: Type.Boolean(),
});
export type Header = typeof Header.static;

/** A record as one line: its `type`, then the record's own fields (storage/records.ts), nothing else. */
const line = <K extends string, T extends TObject>(type: K, record: T) =>
  Type.Object({ type: Type.Literal(type), ...record.properties }, { additionalProperties: false });

const lines = {
  memory: line("memory", recordSchemas.memory),
  event: line("event", recordSchemas.event),
  key: line("key", recordSchemas.key),
  erasure: line("erasure", recordSchemas.erasure),
};

export const checkHeader = TypeCompiler.Compile(Header);
export const lineCheckers = {
  memory: TypeCompiler.Compile(lines.memory),
  event: TypeCompiler.Compile(lines.event),
  key: TypeCompiler.Compile(lines.key),
  erasure: TypeCompiler.Compile(lines.erasure),
};

/** Field order per record type: every export writes its lines in this order, whatever the backend. */
export const fieldOrder: Record<keyof typeof lineCheckers, string[]> = {
  memory: Object.keys(lines.memory.properties),
  event: Object.keys(lines.event.properties),
  key: Object.keys(lines.key.properties),
  erasure: Object.keys(lines.erasure.properties),
};
