/**
 * Every fixed limit of the API, in one place: the schemas, the checks and the tables of docs/api.md
 * follow these. (Configurable ones, such as the largest `content`, are settings in config.ts.)
 */
export const limits = {
  /** namespace, entity and key names, in characters */
  nameChars: 128,
  categoryChars: 64,
  tagChars: 64,
  tags: 32,
  sourceChars: 256,
  /** a keyed fact's `key` (issue 33), in characters */
  memoryKeyChars: 200,
  /** memories one restore (POST /v1/memory/restore) changes at most, in its one write */
  restoreMemories: 10_000,
  /** `metadata`, serialized as JSON */
  metadataBytes: 16 * 1024,
  /** any request body (413 above it) */
  bodyBytes: 1024 * 1024,
  /** nesting of arrays and objects in a request body */
  jsonDepth: 64,
  /** the largest `limit` of a list, events or diff request */
  pageMax: 1000,
  listDefault: 100,
  eventsDefault: 100,
  diffDefault: 200,
  /** a model's `reason`, kept in the audit trail */
  reasonChars: 256,
} as const;
