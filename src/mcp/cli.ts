import { randomBytes } from "node:crypto";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import { Value } from "@sinclair/typebox/value";
import { type Config, ConfigError, loadConfig, parseCommandLine, UsageError } from "../config/config";
import { Name } from "../wire/schemas";
import { createMcpServer } from "./server";
import { tools } from "./tools";

export const mcpUsage = `Usage: memd mcp [flags]

An MCP server on stdio for desktop and command-line agents. Its tools: ${tools.map((t) => t.name).join(", ")}.
Nothing but MCP messages goes to stdout; logs go to stderr.

Either talk to a running memd:
  --url <url>          MEMD_URL        e.g. http://127.0.0.1:8420
  --key <key>          MEMD_API_KEY    the API key the tools act as (its permission and namespaces apply)
or open a data dir in this process (the server must not be running on it):
  --data-dir <dir>     MEMD_DATA_DIR   the LMDB store; other MEMD_* settings (e.g. the model) apply as for serve.
                                       Without --key the tools act as a root key for this process only.
Defaults, so that tool calls can leave them out:
  --namespace <ns>     namespace for every tool that takes one
  --entity <entity>    entity for every tool that takes one
  --help               this text

A flag wins over its environment variable; --url wins over --data-dir.
`;

interface McpArgs {
  url?: string;
  key?: string;
  dataDir?: string;
  namespace?: string;
  entity?: string;
}

/** The flags of `memd mcp`, with their environment variables filled in. */
export function parseMcpArgs(args: string[], env: Record<string, string | undefined> = process.env): McpArgs | "help" {
  if (args.includes("-h")) return "help";
  const line = parseCommandLine(args, {
    valued: ["--url", "--key", "--data-dir", "--namespace", "--entity"],
    switches: ["--help"],
    positionals: false,
  });
  const values: Record<string, string | undefined> = {};
  for (const flag of line.flags.keys()) values[flag.slice(2)] = line.flags.get(flag)!.at(-1);
  if (values.help) return "help";
  const str = (v: unknown) => (typeof v === "string" && v !== "" ? v : undefined);
  const flagUrl = str(values.url);
  const flagDir = str(values["data-dir"]);
  // Explicit flags first; from the environment, a URL before a data dir.
  const url = flagUrl ?? (flagDir ? undefined : str(env.MEMD_URL));
  const dataDir = url ? undefined : (flagDir ?? str(env.MEMD_DATA_DIR));
  if (!url && !dataDir) throw new UsageError("memd mcp needs --url (or MEMD_URL) or --data-dir (or MEMD_DATA_DIR)");
  if (url && !/^https?:\/\/[^/]/.test(url)) throw new UsageError(`--url: expected http(s)://host[:port], got "${url}"`);
  for (const name of ["namespace", "entity"] as const) {
    const v = values[name];
    if (v !== undefined && !Value.Check(Name, v))
      throw new UsageError(`--${name}: expected 1 to 128 characters without control characters`);
  }
  return {
    url: url?.replace(/\/+$/, ""),
    key: str(values.key) ?? str(env.MEMD_API_KEY),
    dataDir,
    namespace: str(values.namespace),
    entity: str(values.entity),
  };
}

/** What `memd mcp` uses of a server it starts in this process (server.ts's Running). */
interface LocalServer {
  url: string;
  stop(): Promise<void>;
}

/**
 * Starts the server that --data-dir names, in this process: server.ts's startServer, given by the
 * command line (main.ts), so that mcp/ names nothing of the server that imports its routes.
 */
type StartServer = (
  config: Config,
  printSecret: (text: string) => void,
  writeLog: (line: string) => void,
) => Promise<LocalServer>;

/** How long, after stdin closed, the calls already read may take to be answered. */
const answerGraceMs = 60_000;

/**
 * `inner` as a transport that counts the requests read and not answered yet; `settled` resolves
 * when none is left. A request the client cancels is owed nothing (MCP sends no answer to it).
 * Built before `connect`, so that no message is read before the count starts.
 */
function countingAnswers(inner: Transport) {
  const owed = new Set<string | number>();
  let wake = () => {};
  const paid = (id: string | number) => {
    owed.delete(id);
    if (owed.size === 0) wake();
  };
  const transport: Transport = {
    start: () => inner.start(),
    close: () => inner.close(),
    send: async (message, options) => {
      try {
        return await inner.send(message, options);
      } finally {
        if (!("method" in message) && "id" in message && message.id !== undefined) paid(message.id);
      }
    },
  };
  inner.onmessage = (message, extra) => {
    if ("method" in message && "id" in message) owed.add(message.id);
    if ("method" in message && message.method === "notifications/cancelled") {
      const id = (message.params as { requestId?: string | number } | undefined)?.requestId;
      if (id !== undefined) paid(id);
    }
    transport.onmessage?.(message, extra);
  };
  inner.onclose = () => transport.onclose?.();
  inner.onerror = (e) => transport.onerror?.(e);
  /** Resolves once nothing is owed, or after `maxMs`. */
  const settled = (maxMs: number) =>
    new Promise<void>((resolve) => {
      if (owed.size === 0) return resolve();
      const timer = setTimeout(resolve, maxMs);
      wake = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  return { transport, settled };
}

/**
 * `memd mcp`: serves the MCP tools on stdio until stdin closes (after answering every call read)
 * or a signal arrives. Answers the
 * exit code for usage errors (2) and start-up failures (1); otherwise it runs until the end.
 */
export async function runMcpCommand(args: string[], start: StartServer): Promise<number> {
  let opts: McpArgs | "help";
  try {
    opts = parseMcpArgs(args);
  } catch (e) {
    if (!(e instanceof UsageError)) throw e;
    process.stderr.write(`memd: ${e.message}\nRun "memd mcp --help" for usage.\n`);
    return 2;
  }
  if (opts === "help") {
    process.stdout.write(mcpUsage);
    return 0;
  }

  let local: LocalServer | undefined;
  let baseUrl = opts.url;
  let key = opts.key;
  if (!baseUrl) {
    // Open the store as serve does (same settings, same checks), on loopback with a free port.
    // Its root key lives in this process only, unless MEMD_API_KEY names one.
    const root = process.env.MEMD_API_KEY || `memd_${randomBytes(24).toString("base64url")}`;
    key ??= root;
    try {
      // The store is the data dir named: a MEMD_DATABASE_URL in the environment does not redirect it.
      const { MEMD_DATABASE_URL: _ignored, ...env } = process.env;
      const config = loadConfig(["--host", "127.0.0.1", "--port", "0", "--data-dir", opts.dataDir!], {
        ...env,
        MEMD_API_KEY: root,
      });
      local = await start(
        config,
        (t) => process.stderr.write(t),
        (line) => process.stderr.write(line),
      );
    } catch (e) {
      const why = e instanceof ConfigError ? e.message : (e as Error).message;
      process.stderr.write(`memd: could not open the data dir ${opts.dataDir}: ${why}\n`);
      return 1;
    }
    baseUrl = local.url;
  }

  const server = createMcpServer({
    fetch: (request) => fetch(request),
    baseUrl,
    authorization: key ? `Bearer ${key}` : undefined,
    defaults: { namespace: opts.namespace, entity: opts.entity },
  });
  const { transport, settled } = countingAnswers(new StdioServerTransport());

  let done: () => void = () => {};
  const finished = new Promise<void>((resolve) => (done = resolve));
  let closing: Promise<void> | undefined;
  // Closing the server closes the transport, whose onclose calls this again: `closing` is set
  // before any of it runs (a microtask later), so that call gets the same promise.
  const shutdown = () =>
    (closing ??= Promise.resolve().then(async () => {
      await server.close().catch(() => {});
      await local?.stop();
      done();
    }));
  // End of input ends the session, but only once every call already read has its answer:
  // `printf '…calls…' | memd mcp` gets them all.
  process.stdin.once("end", () => void settled(answerGraceMs).then(shutdown));
  transport.onclose = () => void shutdown();
  process.once("SIGTERM", () => void shutdown());
  process.once("SIGINT", () => void shutdown());

  await server.connect(transport);
  if (!opts.url) process.stderr.write(`memd mcp: serving on stdio with the store in ${opts.dataDir}\n`);
  else process.stderr.write(`memd mcp: serving on stdio for ${baseUrl}\n`);
  if (!key) process.stderr.write("memd mcp: no key given (--key or MEMD_API_KEY); memd will answer unauthorized\n");
  await finished;
  return 0;
}
