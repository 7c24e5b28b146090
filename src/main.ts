#!/usr/bin/env bun
import "./native-addon";
import { commit, version } from "./build-info";
import { type Config, checkServeConfig, loadConfig, parseFlags, settingsHelp, UsageError } from "./config/config";
import { runKeysCommand } from "./keys/cli";
import { reindex } from "./search/reindex";
import { StartError, startServer } from "./server";
import { storageSite, ToolAdvice } from "./storage/index";
import { runTransferCommand } from "./transfer/cli";

const usage = `memd ${version}: a memory service for AI agents

Usage:
  memd [serve] [flags]     start the server (the default); its flags and settings:
                           memd serve --help
  memd backup <dest> [--data-dir <dir>]
                           copy the store to a new directory, safe while serving
  memd export [--namespace NS]... [--out FILE] [--keys]
                           every memory, event and erasure as JSON Lines; memd export --help
  memd import FILE [--skip-existing]
                           load an export (checked first); memd import --help
  memd compact             rewrite a stopped server's LMDB store without free pages
  memd keys create|list|revoke ...
                           manage API keys on the data dir; memd keys --help
  memd reindex [flags]     rebuild the search index (and embeddings, with an embedding model)
                           from the memories; for upgrades and repairs, with the server stopped
  memd mcp [--url <url> [--key <key>] | --data-dir <dir>] [--namespace <ns>] [--entity <e>]
                           an MCP server on stdio for agents; memd mcp --help
  memd version             print the version and commit
  memd --help              this text; memd serve --help lists every setting
`;

function fail(message: string): never {
  process.stderr.write(`memd: ${message}\nRun "memd --help" for usage.\n`);
  process.exit(2);
}

/** One line on stderr and exit 1: a start or a command that could not run. */
function die(message: string): never {
  process.stderr.write(`memd: ${message}\n`);
  process.exit(1);
}

/** The config from flags and environment, or exit 2 with the reason. */
function configFrom(args: string[], check: (c: Config) => Config = (c) => c) {
  try {
    return check(loadConfig(args));
  } catch (e) {
    if (e instanceof UsageError) fail(e.message);
    throw e;
  }
}

async function serve(args: string[]) {
  if (wantsHelp(args)) {
    process.stdout.write(
      `Usage: memd serve [flags]\n\nEvery flag can also be set by its environment variable; flags win.\n\n${settingsHelp()}\n`,
    );
    return;
  }
  const config = configFrom(args, checkServeConfig);
  let server: Awaited<ReturnType<typeof startServer>>;
  try {
    server = await startServer(config);
  } catch (e) {
    if (e instanceof StartError) die(e.message);
    die(`could not start: ${String((e as Error)?.message ?? e).split("\n")[0]}`);
  }
  let signals = 0;
  const onSignal = async (signal: string) => {
    // A second signal exits at once: LMDB commits are atomic, so the store stays whole.
    if (++signals > 1) {
      process.stderr.write(`memd: ${signal} again, exiting now\n`);
      process.exit(1);
    }
    await server.stop();
    process.exit(0);
  };
  process.on("SIGTERM", () => void onSignal("SIGTERM"));
  process.on("SIGINT", () => void onSignal("SIGINT"));
}

const wantsHelp = (args: string[]) => args.includes("--help") || args.includes("-h");

const backupUsage = `Usage: memd backup <dest> [--data-dir <dir>]

Copies the LMDB store to <dest>, a new directory, as one consistent snapshot; safe while a
server runs. The copy opens as a data dir of its own. On PostgreSQL, use the database's own
tools (pg_dump, or base backups with WAL archiving).
`;

const reindexUsage = `Usage: memd reindex [serve flags]

Rebuilds the keyword index from the current memories and, with an embedding model set
(--embed-base-url, --embed-model), embeds every current memory again. For upgrades and repairs;
on LMDB the server must be stopped (the data dir is locked). Takes the settings of memd serve
(memd serve --help), e.g. --data-dir or --database-url.
`;

async function backup(args: string[]) {
  if (wantsHelp(args)) return void process.stdout.write(backupUsage);
  const positionals: string[] = [];
  let flags: [string, string][];
  try {
    flags = parseFlags(args, ["--data-dir", "--database-url"], positionals);
  } catch (e) {
    fail((e as Error).message);
  }
  const [dest, ...extra] = positionals;
  if (!dest) fail("backup needs a destination directory: memd backup <dest> [--data-dir <dir>]");
  if (extra.length > 0) fail(`unexpected argument "${extra[0]}"`);
  const config = configFrom(flags.flat());
  try {
    await storageSite(config).backup(dest);
  } catch (e) {
    // On PostgreSQL the database's own tools make the copy (one snapshot, or base backup plus WAL).
    if (e instanceof ToolAdvice) {
      process.stderr.write(`memd: ${e.message}\n`);
      process.exit(1);
    }
    die(`backup failed: ${(e as Error).message}`);
  }
  process.stdout.write(`memd: copied ${config.dataDir} to ${dest}\n`);
}

const [command, ...rest] = process.argv.slice(2);
switch (command) {
  case undefined:
    await serve([]);
    break;
  case "serve":
    await serve(rest);
    break;
  case "backup":
    await backup(rest);
    break;
  case "keys":
    process.exitCode = await runKeysCommand(rest);
    break;
  case "reindex": {
    if (wantsHelp(rest)) process.stdout.write(reindexUsage);
    else process.exitCode = await reindex(configFrom(rest), (line) => process.stdout.write(`${line}\n`));
    break;
  }
  case "export":
  case "import":
  case "compact": {
    process.exitCode = await runTransferCommand(command, rest);
    break;
  }
  case "mcp": {
    // Loaded only here: the MCP SDK would add to every other command's start-up.
    const { runMcpCommand } = await import("./mcp/cli");
    process.exitCode = await runMcpCommand(rest, startServer);
    break;
  }
  case "version":
  case "--version":
    if (rest.length > 0) fail(`${command} takes no arguments; got "${rest[0]}"`);
    process.stdout.write(`memd ${version} (${commit})\n`);
    break;
  case "help":
  case "--help":
  case "-h":
    process.stdout.write(usage);
    break;
  default:
    if (command.startsWith("-")) await serve([command, ...rest]);
    else fail(`unknown command "${command}"`);
}
