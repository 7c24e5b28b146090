#!/usr/bin/env bun
import { commit, version } from "./build-info";
import { ConfigError, loadConfig, settingsHelp } from "./config/config";
import { runKeysCommand } from "./keys/cli";
import { backupStore } from "./ops/backup";
import { startServer } from "./server";

const usage = `memd ${version}: a memory service for AI agents

Usage:
  memd [serve] [flags]     start the server (the default)
  memd backup <dest> [--data-dir <dir>]
                           copy the store to a new directory, safe while serving
  memd keys create|list|revoke ...
                           manage API keys on the data dir; memd keys --help
  memd mcp [--url <url> | --data-dir <dir>] [--namespace <ns>] [--entity <e>]
                           an MCP server on stdio for agents; memd mcp --help
  memd version             print the version and commit
  memd --help              this text; memd serve --help lists every setting
`;

function fail(message: string): never {
  process.stderr.write(`memd: ${message}\nRun "memd --help" for usage.\n`);
  process.exit(2);
}

/** The config from flags and environment, or exit 2 with the reason. */
function configFrom(args: string[]) {
  try {
    return loadConfig(args);
  } catch (e) {
    if (e instanceof ConfigError) fail(e.message);
    throw e;
  }
}

async function serve(args: string[]) {
  if (args.includes("--help") || args.includes("-h")) {
    process.stdout.write(
      `Usage: memd serve [flags]\n\nEvery flag can also be set by its environment variable; flags win.\n\n${settingsHelp()}\n`,
    );
    return;
  }
  const config = configFrom(args);
  let server: Awaited<ReturnType<typeof startServer>>;
  try {
    server = await startServer(config);
  } catch (e) {
    process.stderr.write(
      `memd: could not start on ${config.host}:${config.port} with data dir ${config.dataDir}: ${(e as Error).message}\n`,
    );
    process.exit(1);
  }
  const shutdown = async () => {
    await server.stop();
    process.exit(0);
  };
  process.once("SIGTERM", shutdown);
  process.once("SIGINT", shutdown);
}

async function backup(args: string[]) {
  const [dest, ...flags] = args;
  if (!dest || dest.startsWith("-"))
    fail("backup needs a destination directory: memd backup <dest> [--data-dir <dir>]");
  const config = configFrom(flags);
  if (config.databaseUrl) {
    // A copy made through one client could not be consistent with the replicas' writes the way
    // the database's own tools are (one snapshot, or base backup plus WAL): use those.
    process.stderr.write(
      "memd: the store is PostgreSQL (MEMD_DATABASE_URL or --database-url): back it up with the database's own tools (pg_dump, or base backups with WAL archiving); see the README\n",
    );
    process.exit(1);
  }
  try {
    await backupStore(config.dataDir, dest);
  } catch (e) {
    process.stderr.write(`memd: backup failed: ${(e as Error).message}\n`);
    process.exit(1);
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
  case "mcp": {
    // Loaded only here: the MCP SDK would add to every other command's start-up.
    const { runMcpCommand } = await import("./mcp/cli");
    process.exitCode = await runMcpCommand(rest);
    break;
  }
  case "version":
  case "--version":
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
