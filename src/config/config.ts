import { parseArgs } from "node:util";

/**
 * Settings come from flags, then environment variables, then defaults; flags win.
 * One table drives parsing, validation and `memd serve --help`, so they cannot drift apart.
 */

/** How the model is asked for the answer's shape; the one list of modes (see extraction/llm.ts). */
export const structuredModes = ["json_schema", "json_object", "prompt"] as const;
export type StructuredMode = (typeof structuredModes)[number];
export type LogLevel = "debug" | "info" | "warn" | "error";
/** Per-key token bucket: `rps` tokens a second, at most `burst` saved up. */
export interface RateLimit {
  rps: number;
  burst: number;
}

export interface Config {
  host: string;
  port: number;
  dataDir: string;
  apiKey: string | undefined;
  maxContentBytes: number;
  mapSizeMb: number;
  databaseUrl: string | undefined;
  dbPool: number;
  databasePooler: "none" | "session" | "transaction";
  dbConnectTimeoutMs: number;
  dbStatementTimeoutMs: number;
  pgKeywordLists: boolean;
  pgSnapshotFrom: number;
  keywordPrebuild: number;
  searchMemoryMb: number;
  logLevel: LogLevel;
  llmBaseUrl: string | undefined;
  llmModel: string | undefined;
  llmApiKey: string | undefined;
  llmTimeoutMs: number;
  llmStructured: StructuredMode;
  embedBaseUrl: string | undefined;
  embedModel: string | undefined;
  embedApiKey: string | undefined;
  embedDimensions: number | undefined;
  embedTimeoutMs: number;
  /** The built-in embedder, used when no embedding endpoint is set (src/embedding/builtin.ts). */
  embedder: "builtin" | "none";
  // Issue 36: the optional reranker (search/rerank.ts).
  rerankBaseUrl: string | undefined;
  rerankModel: string | undefined;
  rerankApiKey: string | undefined;
  rerankTimeoutMs: number;
  rateLimit: RateLimit | undefined;
  maxModelCallsPerKey: number;
  metricsPublic: boolean;
  streamKeepaliveMs: number;
  shutdownGraceMs: number;
  mem0Namespace: string | undefined;
  webhookAllowPrivate: boolean;
  webhookRetryBaseMs: number;
  webhookRetryMaxMs: number;
  webhookDisableAfterMs: number;
  webhookConnectTimeoutMs: number;
  webhookTimeoutMs: number;
  webhookThreadNice: number;
  webhookBusyPercent: number;
  /** Issue 33: consolidation in the background every this many seconds; 0: off. */
  consolidateEverySeconds: number;
}

interface Setting {
  key: keyof Config;
  flag: string;
  env: string;
  help: string;
  default: Config[keyof Config];
  parse: (raw: string) => Config[keyof Config];
  /** A flag without a value (`--webhook-allow-private`): given means true; its variable takes a value. */
  switch?: true;
}

const int =
  (min: number, max: number) =>
  (raw: string): number => {
    const n = Number(raw);
    if (!Number.isInteger(n) || n < min || n > max)
      throw new Error(`expected a whole number from ${min} to ${max}, got "${raw}"`);
    return n;
  };
const oneOf =
  <T extends string>(...values: T[]) =>
  (raw: string): T => {
    if (!values.includes(raw as T)) throw new Error(`expected one of ${values.join(", ")}, got "${raw}"`);
    return raw as T;
  };
const text = (raw: string) => raw;
/** "RPS[:BURST]", e.g. "50" or "50:100"; the burst defaults to RPS (at least 1). */
export function parseRateLimit(raw: string): RateLimit {
  const m = /^(\d+(?:\.\d+)?)(?::(\d+))?$/.exec(raw.trim());
  const rps = m ? Number(m[1]) : Number.NaN;
  const burst = m?.[2] === undefined ? Math.max(1, Math.ceil(rps)) : Number(m[2]);
  if (!m || !(rps > 0) || rps > 1e6 || !(burst >= 1) || burst > 1e6)
    throw new Error(`expected RPS[:BURST] with RPS > 0 and a whole BURST >= 1, e.g. 50 or 50:100, got "${raw}"`);
  return { rps, burst };
}
const bool = (raw: string) => oneOf("true", "false", "1", "0")(raw) === "true" || raw === "1";

export const settings: Setting[] = [
  { key: "host", flag: "--host", env: "MEMD_HOST", default: "127.0.0.1", parse: text, help: "address to listen on" },
  {
    key: "port",
    flag: "--port",
    env: "MEMD_PORT",
    default: 8420,
    parse: int(0, 65535),
    help: "port to listen on (0 picks a free one)",
  },
  {
    key: "dataDir",
    flag: "--data-dir",
    env: "MEMD_DATA_DIR",
    default: "./memd-data",
    parse: text,
    help: "directory of the LMDB store",
  },
  {
    key: "apiKey",
    flag: "--api-key",
    env: "MEMD_API_KEY",
    default: undefined,
    parse: text,
    help: "root key (all permissions, all namespaces); unset: one is created on first start",
  },
  {
    key: "maxContentBytes",
    flag: "--max-content-bytes",
    env: "MEMD_MAX_CONTENT_BYTES",
    default: 65536,
    parse: int(1, 1048576),
    help: "largest `content` accepted, in bytes of UTF-8",
  },
  {
    key: "mapSizeMb",
    flag: "--map-size-mb",
    env: "MEMD_MAP_SIZE_MB",
    default: 65536,
    parse: int(16, 16777216),
    help: "largest size the LMDB file may grow to, in MiB",
  },
  {
    key: "databaseUrl",
    flag: "--database-url",
    env: "MEMD_DATABASE_URL",
    default: undefined,
    parse: (raw) => {
      if (!/^postgres(ql)?:\/\//.test(raw)) throw new Error(`expected a postgres:// URL, got "${raw.slice(0, 12)}…"`);
      return raw;
    },
    help: "a postgres:// URL: store in PostgreSQL instead of LMDB in the data dir",
  },
  {
    key: "dbPool",
    flag: "--db-pool",
    env: "MEMD_DB_POOL",
    default: 10,
    parse: int(1, 1000),
    help: "PostgreSQL connections per process",
  },
  {
    key: "databasePooler",
    flag: "--database-pooler",
    env: "MEMD_DATABASE_POOLER",
    default: "none",
    parse: oneOf("none", "session", "transaction"),
    help: "what is between memd and PostgreSQL: none, session (a pooler in session mode) or transaction (PgBouncer in transaction mode: no named prepared statements)",
  },
  {
    key: "dbConnectTimeoutMs",
    flag: "--db-connect-timeout-ms",
    env: "MEMD_DB_CONNECT_TIMEOUT_MS",
    default: 5000,
    parse: int(100, 600000),
    help: "how long to wait for a PostgreSQL connection",
  },
  {
    key: "dbStatementTimeoutMs",
    flag: "--db-statement-timeout-ms",
    env: "MEMD_DB_STATEMENT_TIMEOUT_MS",
    default: 5000,
    parse: int(100, 600000),
    help: "longest a PostgreSQL statement may run before it is cancelled",
  },
  {
    key: "pgKeywordLists",
    flag: "--pg-keyword-lists",
    env: "MEMD_PG_KEYWORD_LISTS",
    default: true,
    parse: bool,
    help: "on PostgreSQL, keep each searched namespace's keyword lists in this process's memory (false: every keyword search is SQL)",
  },
  {
    key: "pgSnapshotFrom",
    flag: "--pg-snapshot-from",
    env: "MEMD_PG_SNAPSHOT_FROM",
    default: 10000,
    parse: int(0, 1000000000),
    help: "on PostgreSQL, write the keyword lists and vectors of every namespace of at least this many memories to the database once built, so other replicas and restarts read them instead of building them (0: off)",
  },
  {
    key: "keywordPrebuild",
    flag: "--keyword-prebuild",
    env: "MEMD_KEYWORD_PREBUILD",
    default: 20000,
    parse: int(0, 1000000000),
    help: "on LMDB, write the keyword snapshot of every namespace of at least this many memories in the background, searched or not, so its first search after a restart is fast (0: only searched namespaces)",
  },
  {
    key: "searchMemoryMb",
    flag: "--search-memory-mb",
    env: "MEMD_SEARCH_MEMORY_MB",
    default: 256,
    parse: int(1, 1048576),
    help: "what the in-memory keyword lists and vectors of every namespace may hold together, in MiB; over it, the least recently searched namespaces are released and brought back at their next search (on LMDB, namespaces of up to a few hundred memories within a 64th of it, at least 2 MiB)",
  },
  {
    key: "logLevel",
    flag: "--log-level",
    env: "MEMD_LOG_LEVEL",
    default: "info",
    parse: oneOf("debug", "info", "warn", "error"),
    help: "debug, info, warn or error",
  },
  {
    key: "llmBaseUrl",
    flag: "--llm-base-url",
    env: "MEMD_LLM_BASE_URL",
    default: undefined,
    parse: text,
    help: "OpenAI-compatible endpoint, e.g. http://127.0.0.1:11434/v1; unset: built-in extractor",
  },
  {
    key: "llmModel",
    flag: "--llm-model",
    env: "MEMD_LLM_MODEL",
    default: undefined,
    parse: text,
    help: "model name sent to the endpoint",
  },
  {
    key: "llmApiKey",
    flag: "--llm-api-key",
    env: "MEMD_LLM_API_KEY",
    default: undefined,
    parse: text,
    help: "bearer key for the model endpoint (optional)",
  },
  {
    key: "llmTimeoutMs",
    flag: "--llm-timeout-ms",
    env: "MEMD_LLM_TIMEOUT_MS",
    default: 30000,
    parse: int(1, 600000),
    help: "model call timeout in milliseconds",
  },
  {
    key: "llmStructured",
    flag: "--llm-structured",
    env: "MEMD_LLM_STRUCTURED",
    default: "json_schema",
    parse: oneOf(...structuredModes),
    help: "how the answer schema reaches the model: json_schema, json_object or prompt",
  },
  {
    key: "embedBaseUrl",
    flag: "--embed-base-url",
    env: "MEMD_EMBED_BASE_URL",
    default: undefined,
    parse: text,
    help: "OpenAI-compatible embeddings endpoint, e.g. http://127.0.0.1:11434/v1; unset: the built-in embedder (--embedder)",
  },
  {
    key: "embedModel",
    flag: "--embed-model",
    env: "MEMD_EMBED_MODEL",
    default: undefined,
    parse: text,
    help: "embedding model name sent to the endpoint, e.g. nomic-embed-text",
  },
  {
    key: "embedApiKey",
    flag: "--embed-api-key",
    env: "MEMD_EMBED_API_KEY",
    default: undefined,
    parse: text,
    help: "bearer key for the embeddings endpoint (optional)",
  },
  {
    key: "embedDimensions",
    flag: "--embed-dimensions",
    env: "MEMD_EMBED_DIMENSIONS",
    default: undefined,
    parse: int(1, 65536),
    help: "vector length to ask the model for (optional; only models that support it)",
  },
  {
    key: "embedTimeoutMs",
    flag: "--embed-timeout-ms",
    env: "MEMD_EMBED_TIMEOUT_MS",
    default: 10000,
    parse: int(1, 600000),
    help: "embedding call timeout in milliseconds",
  },
  // Issue 36: the optional reranker (search/rerank.ts).
  {
    key: "rerankBaseUrl",
    flag: "--rerank-base-url",
    env: "MEMD_RERANK_BASE_URL",
    default: undefined,
    parse: text,
    help: "reranker endpoint ending in /v1 (POST /v1/rerank: Cohere, Jina, Voyage, vLLM, llama.cpp, TEI); unset: no reranking",
  },
  {
    key: "rerankModel",
    flag: "--rerank-model",
    env: "MEMD_RERANK_MODEL",
    default: undefined,
    parse: text,
    help: "reranker model name sent to the endpoint, e.g. bge-reranker-v2-m3",
  },
  {
    key: "rerankApiKey",
    flag: "--rerank-api-key",
    env: "MEMD_RERANK_API_KEY",
    default: undefined,
    parse: text,
    help: "bearer key for the reranker endpoint (optional)",
  },
  {
    key: "rerankTimeoutMs",
    flag: "--rerank-timeout-ms",
    env: "MEMD_RERANK_TIMEOUT_MS",
    default: 5000,
    parse: int(1, 600000),
    help: "reranker call timeout in milliseconds (past it, the search's own order is answered)",
  },
  {
    key: "embedder",
    flag: "--embedder",
    env: "MEMD_EMBEDDER",
    default: "builtin",
    parse: oneOf("builtin", "none"),
    help: "without --embed-base-url: builtin (a small embedder inside memd; hybrid search by default) or none (keyword search only)",
  },
  {
    key: "rateLimit",
    flag: "--rate-limit",
    env: "MEMD_RATE_LIMIT",
    default: undefined,
    parse: parseRateLimit,
    help: "per-key limit as RPS[:BURST], e.g. 50:100; unset: no limit",
  },
  {
    key: "maxModelCallsPerKey",
    flag: "--max-model-calls-per-key",
    env: "MEMD_MAX_MODEL_CALLS_PER_KEY",
    default: 4,
    parse: int(1, 1000),
    help: "concurrent smart stores per key",
  },
  {
    key: "metricsPublic",
    flag: "--metrics-public",
    env: "MEMD_METRICS_PUBLIC",
    default: false,
    parse: bool,
    help: "serve /metrics without a key (default: needs an admin key scoped to *)",
  },
  {
    key: "consolidateEverySeconds",
    flag: "--consolidate-every",
    env: "MEMD_CONSOLIDATE_EVERY",
    default: 0,
    parse: int(0, 31_536_000),
    help: "consolidate the entities changed since the last run every this many seconds (docs/undo.md); 0: off",
  },
  {
    key: "shutdownGraceMs",
    flag: "--shutdown-grace-ms",
    env: "MEMD_SHUTDOWN_GRACE_MS",
    default: 10000,
    parse: int(0, 3600000),
    help: "on SIGTERM/SIGINT, how long requests in flight may finish before they are cut off",
  },
  {
    key: "streamKeepaliveMs",
    flag: "--stream-keepalive-ms",
    env: "MEMD_STREAM_KEEPALIVE_MS",
    default: 15000,
    parse: int(10, 3_600_000),
    help: "a keepalive comment on idle event streams this often, in ms",
  },
  {
    key: "mem0Namespace",
    flag: "--mem0-namespace",
    env: "MEMD_MEM0_NAMESPACE",
    default: undefined,
    parse: (raw) => {
      if (raw.length > 128 || /\p{Cc}/u.test(raw)) throw new Error("expected a namespace name of 1 to 128 characters");
      return raw;
    },
    help: "namespace of mem0 API calls whose key covers more than one and that send no X-Memd-Namespace header",
  },
  // Webhooks (issue 34, docs/webhooks.md).
  {
    key: "webhookAllowPrivate",
    flag: "--webhook-allow-private",
    env: "MEMD_WEBHOOK_ALLOW_PRIVATE",
    default: false,
    parse: bool,
    switch: true,
    help: "let webhooks reach loopback, private and link-local addresses (development and private networks only)",
  },
  {
    key: "webhookRetryBaseMs",
    flag: "--webhook-retry-base-ms",
    env: "MEMD_WEBHOOK_RETRY_BASE_MS",
    default: 5000,
    parse: int(1, 3_600_000),
    help: "first webhook retry after about this long (jittered 50-100%), doubling each time",
  },
  {
    key: "webhookRetryMaxMs",
    flag: "--webhook-retry-max-ms",
    env: "MEMD_WEBHOOK_RETRY_MAX_MS",
    default: 900_000,
    parse: int(1, 86_400_000),
    help: "longest wait between two webhook retries",
  },
  {
    key: "webhookDisableAfterMs",
    flag: "--webhook-disable-after-ms",
    env: "MEMD_WEBHOOK_DISABLE_AFTER_MS",
    default: 259_200_000,
    parse: int(1, 2_592_000_000),
    help: "a webhook failing this long without a success is disabled (default 72 hours)",
  },
  {
    key: "webhookConnectTimeoutMs",
    flag: "--webhook-connect-timeout-ms",
    env: "MEMD_WEBHOOK_CONNECT_TIMEOUT_MS",
    default: 5000,
    parse: int(1, 600_000),
    help: "a webhook receiver must accept the connection within this time",
  },
  {
    key: "webhookTimeoutMs",
    flag: "--webhook-timeout-ms",
    env: "MEMD_WEBHOOK_TIMEOUT_MS",
    default: 10_000,
    parse: int(1, 600_000),
    help: "a webhook receiver must answer within this time of the request",
  },
  {
    key: "webhookThreadNice",
    flag: "--webhook-thread-nice",
    env: "MEMD_WEBHOOK_THREAD_NICE",
    default: 19,
    parse: int(0, 19),
    help: "the webhook delivery thread runs this much nicer than the process (Linux; at 19, the default, also in the idle scheduling class where it may leave it for its writes): on a busy core, requests come first and deliveries catch up after (0: as the process)",
  },
  {
    key: "webhookBusyPercent",
    flag: "--webhook-busy-percent",
    env: "MEMD_WEBHOOK_BUSY_PERCENT",
    default: 100,
    parse: int(1, 100),
    help: "while stores come and the machine's CPU is contended (Linux), webhook deliveries take at most this percent of a core; the rest waits for the stores to pause (100: no limit)",
  },
];

/**
 * A mistake on a command line (an unknown flag, a missing value, a wrong argument): every command
 * says why on stderr and exits 2. One class for every command (serve, keys, mcp, export, ...).
 */
export class UsageError extends Error {}
/** A setting whose value cannot be used (a flag's or an environment variable's): a UsageError too. */
export class ConfigError extends UsageError {}

/** Builds the Config from command-line flags and an environment, flags first. */
export function loadConfig(args: string[], env: Record<string, string | undefined> = process.env): Config {
  const values: Record<string, unknown> = {};
  for (const s of settings) {
    const raw = env[s.env];
    values[s.key] = raw === undefined || raw === "" ? s.default : parseSetting(s, raw, s.env);
  }
  const line = parseCommandLine(args, {
    valued: settings.filter((s) => !s.switch).map((s) => s.flag),
    switches: settings.filter((s) => s.switch).map((s) => s.flag),
    positionals: false,
  });
  for (const [flag, raw] of line.pairs) {
    const s = settings.find((x) => x.flag === flag)!;
    values[s.key] = parseSetting(s, raw, flag);
  }
  for (const s of settings) if (s.switch && line.flags.has(s.flag)) values[s.key] = true;
  return values as unknown as Config;
}

/** Checks what concerns settings together, for `serve` (keys and backup read only the data dir). */
export function checkServeConfig(config: Config): Config {
  if (config.llmModel && !config.llmBaseUrl)
    throw new ConfigError("--llm-model (MEMD_LLM_MODEL) needs --llm-base-url (MEMD_LLM_BASE_URL) as well");
  return config;
}

/**
 * `--flag value` and `--flag=value` pairs through node:util parseArgs, for the given string
 * flags; the last of a repeated flag wins. Positionals are refused unless `positionals` is set,
 * which collects them. Errors are UsageErrors in our words ("unknown flag --x").
 */
export function parseFlags(args: string[], flags: string[], positionals?: string[]): [string, string][] {
  const line = parseCommandLine(args, { valued: flags, positionals: positionals !== undefined });
  positionals?.push(...line.positional);
  return line.pairs;
}

/** A command line read by parseCommandLine. */
export interface CommandLine {
  /** Valued flags in the order given, `--flag=value` split. */
  pairs: [string, string][];
  /** Every value of each valued flag; a switch given maps to ["true"]. */
  flags: Map<string, string[]>;
  positional: string[];
  /** The one value of a flag (a UsageError when it was given twice), or undefined. */
  one(flag: string): string | undefined;
}

/**
 * The command-line reader of every command: `--flag value` and `--flag=value` for `valued` flags
 * (repeatable), bare `switches`, and positional arguments unless `positionals` is false; through
 * node:util parseArgs. Its mistakes are UsageErrors in our words ("unknown flag --x", "--out needs
 * a value", "--keys takes no value", 'unexpected argument "x"').
 */
export function parseCommandLine(
  args: string[],
  spec: { valued: string[]; switches?: string[]; positionals?: boolean },
): CommandLine {
  const options = Object.fromEntries([
    ...spec.valued.map((f) => [f.slice(2), { type: "string" as const, multiple: true }]),
    ...(spec.switches ?? []).map((f) => [f.slice(2), { type: "boolean" as const, multiple: true }]),
  ]);
  // A negative number after a valued flag is its value (parseArgs takes it for a flag): so that
  // `--port -1` is refused for its value, not as "needs a value".
  const joined: string[] = [];
  for (let i = 0; i < args.length; i++)
    joined.push(spec.valued.includes(args[i]) && /^-\d/.test(args[i + 1] ?? "") ? `${args[i]}=${args[++i]}` : args[i]);
  args = joined;
  let parsed: ReturnType<typeof parseArgs>;
  try {
    parsed = parseArgs({ args, options, strict: true, allowPositionals: spec.positionals !== false, tokens: true });
  } catch (e) {
    const message = (e as Error).message;
    const m = /'(-[^' ]+)/.exec(message);
    const code = (e as { code?: string }).code;
    if (code === "ERR_PARSE_ARGS_UNKNOWN_OPTION") throw new UsageError(`unknown flag ${m?.[1] ?? ""}`.trim());
    if (code === "ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL")
      throw new UsageError(`unexpected argument "${/'([^']*)'/.exec(message)?.[1] ?? ""}"`);
    if (code === "ERR_PARSE_ARGS_INVALID_OPTION_VALUE")
      throw new UsageError(
        /does not take an argument/.test(message)
          ? `${m?.[1] ?? "a flag"} takes no value`
          : `${m?.[1] ?? "a flag"} needs a value`,
      );
    throw new UsageError(message);
  }
  const pairs: [string, string][] = [];
  const flags = new Map<string, string[]>();
  const positional: string[] = [];
  for (const t of parsed.tokens ?? []) {
    if (t.kind === "positional") positional.push(t.value);
    if (t.kind !== "option") continue;
    const flag = `--${t.name}`;
    const value = t.value ?? "true";
    if (t.value !== undefined) pairs.push([flag, value]);
    flags.set(flag, [...(flags.get(flag) ?? []), value]);
  }
  const one = (flag: string) => {
    const v = flags.get(flag);
    if (v && v.length > 1) throw new UsageError(`${flag} given more than once`);
    return v?.[0];
  };
  return { pairs, flags, positional, one };
}

function parseSetting(s: Setting, raw: string, source: string) {
  try {
    return s.parse(raw);
  } catch (e) {
    throw new ConfigError(`${source}: ${(e as Error).message}`);
  }
}

/** The settings table as help text for `memd serve --help`. */
export function settingsHelp(): string {
  const rows = settings.map((s) => {
    const def = s.default === undefined ? "" : ` (default: ${s.default})`;
    return `  ${(s.switch ? s.flag : `${s.flag} <value>`).padEnd(32)} ${s.env.padEnd(30)} ${s.help}${def}`;
  });
  return `  ${"flag".padEnd(32)} ${"environment".padEnd(30)} meaning\n${rows.join("\n")}`;
}
