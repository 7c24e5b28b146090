#!/usr/bin/env bun
import { commit, version } from "./build-info";
import { ConfigError, loadConfig, settingsHelp } from "./config/config";
import { startServer } from "./server";

const usage = `memd ${version}: a memory service for AI agents

Usage:
  memd [serve] [flags]     start the server (the default)
  memd version             print the version and commit
  memd --help              this text; memd serve --help lists every setting
`;

function fail(message: string): never {
  process.stderr.write(`memd: ${message}\nRun "memd --help" for usage.\n`);
  process.exit(2);
}

async function serve(args: string[]) {
  if (args.includes("--help") || args.includes("-h")) {
    process.stdout.write(`Usage: memd serve [flags]\n\nEvery flag can also be set by its environment variable; flags win.\n\n${settingsHelp()}\n`);
    return;
  }
  let config;
  try {
    config = loadConfig(args);
  } catch (e) {
    if (e instanceof ConfigError) fail(e.message);
    throw e;
  }
  const server = await startServer(config);
  const shutdown = async () => {
    await server.stop();
    process.exit(0);
  };
  process.once("SIGTERM", shutdown);
  process.once("SIGINT", shutdown);
}

const [command, ...rest] = process.argv.slice(2);
switch (command) {
  case undefined:
    await serve([]);
    break;
  case "serve":
    await serve(rest);
    break;
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
