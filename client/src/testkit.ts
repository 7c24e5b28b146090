// @memd/client/testkit: a real, throwaway memd for your own tests, under Node (≥ 20) or Bun.
//
//   const memd = await startMemd();
//   await memd.client.store({ namespace: "app", entity: "u1", content: "likes tea", infer: false });
//   await memd.stop();
//
// Only node: modules, so it runs wherever Node runs (`node --test`, vitest, jest) and under Bun.
// The server is the memd binary given as `bin`, else the one MEMD_BIN names, else `memd` on PATH
// (see findMemd). It listens on port 0 (the kernel's free port; no race with another test) and
// the kit reads the address from its start-up log line.
import { type ChildProcess, spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { accessSync, constants, existsSync, mkdtempSync, rmSync, statSync } from "node:fs";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { delimiter, join, resolve } from "node:path";
import { createClient, type MemdClient } from "./client.js";
import type { ModelAnswer } from "./types.gen.js";

/** A scripted answer of the fake model: the operations memd should apply, or raw text (to test bad output). */
export type ScriptedAnswer = ModelAnswer | string | { status: number; body?: unknown };

/** What the fake model saw: the chat-completions request memd sent. */
export interface ModelRequest {
  model: string;
  messages: { role: string; content: unknown }[];
  [key: string]: unknown;
}

export interface StartOptions {
  /**
   * A fake OpenAI-compatible model for smart stores (`infer: true`): answers in order, or a function of
   * the request. When the script runs out, it answers `{"operations": []}` (nothing to store).
   * Without it, memd runs with its built-in extractor.
   */
  model?: ScriptedAnswer[] | ((request: ModelRequest) => ScriptedAnswer);
  /** The memd binary to run (e.g. a release's memd-0.1.0-linux-x64, or bin/memd in a checkout); see findMemd. */
  bin?: string;
  /** Extra `serve` flags, e.g. ["--rate-limit", "5"]. */
  args?: string[];
  /** Extra environment for the server. */
  env?: Record<string, string>;
  /** How long to wait for the server to start, in ms (default 20000). */
  startTimeoutMs?: number;
}

export interface Memd {
  /** Base URL, e.g. http://127.0.0.1:41234 */
  url: string;
  /** The root (admin) key. */
  key: string;
  /** A client with the root key. */
  client: MemdClient;
  /** The temp data dir (removed by `stop`). */
  dataDir: string;
  /** The fake model's requests so far (empty without `model`). */
  modelRequests: ModelRequest[];
  /** Server log lines (JSON) so far. */
  logs(): string;
  /** Stops the server and the fake model and removes the data dir. */
  stop(): Promise<void>;
}

/**
 * The memd command the test kit runs: `bin` when given, else the MEMD_BIN environment variable,
 * else `memd` on PATH. Throws an error naming both when there is none.
 */
export function findMemd(bin?: string): string {
  const given = bin ?? process.env.MEMD_BIN;
  if (given) {
    const path = resolve(given);
    if (!existsSync(path))
      throw new Error(`memd test kit: ${bin ? "bin" : "MEMD_BIN"} is ${given}, and there is no file there`);
    return path;
  }
  const onPath = which("memd");
  if (onPath) return onPath;
  throw new Error(
    "memd test kit: no memd to run. Set MEMD_BIN to a memd binary (a release's memd-<version>-linux-x64, " +
      "dist/memd after make build, or bin/memd in a checkout), or put memd on PATH; neither is there now.",
  );
}

/** The first executable file `name` in a directory of PATH, as the shell finds it. */
function which(name: string): string | undefined {
  for (const dir of (process.env.PATH ?? "").split(delimiter)) {
    if (!dir) continue;
    const path = join(dir, name);
    try {
      if (!statSync(path).isFile()) continue;
      accessSync(path, constants.X_OK);
      return path;
    } catch {}
  }
  return undefined;
}

const sleep = (ms: number) => new Promise<void>((done) => setTimeout(done, ms));

/** Resolves when the process has exited (at once if it already has). */
const exited = (proc: ChildProcess) =>
  new Promise<void>((done) => {
    if (proc.exitCode !== null || proc.signalCode !== null) done();
    else proc.once("exit", () => done());
  });

/** Starts memd on a free port with a temp data dir and a fresh root key; see `Memd`. */
export async function startMemd(options: StartOptions = {}): Promise<Memd> {
  const bin = findMemd(options.bin);
  const dataDir = mkdtempSync(join(tmpdir(), "memd-testkit-"));
  const key = `memd_testkit_${randomUUID().replaceAll("-", "")}`;
  const fake = options.model ? await startFakeModel(options.model) : undefined;
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? "/usr/bin:/bin",
    MEMD_API_KEY: key,
    MEMD_LOG_LEVEL: "info",
    ...(fake ? { MEMD_LLM_BASE_URL: fake.url, MEMD_LLM_MODEL: "fake", MEMD_LLM_API_KEY: "fake" } : {}),
    ...options.env,
  };
  const args = ["serve", "--host", "127.0.0.1", "--port", "0", "--data-dir", dataDir, ...(options.args ?? [])];
  const proc = spawn(bin, args, { cwd: dataDir, env, stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  let spawnError: Error | undefined;
  proc.on("error", (e) => {
    spawnError = e; // e.g. EACCES: reported by the start-up wait below
  });
  for (const stream of [proc.stdout, proc.stderr]) {
    stream?.setEncoding("utf8");
    stream?.on("data", (chunk: string) => {
      out += chunk;
    });
  }

  let stopped: Promise<void> | undefined;
  const stop = () =>
    (stopped ??= (async () => {
      if (proc.exitCode === null && proc.signalCode === null && !spawnError) {
        proc.kill("SIGTERM");
        let timer: ReturnType<typeof setTimeout> | undefined;
        const late = new Promise<false>((done) => {
          timer = setTimeout(() => done(false), 10_000);
        });
        // The timer is cleared, or it would keep a test runner's process alive for 10 s more.
        const done = await Promise.race([exited(proc).then(() => true), late]);
        clearTimeout(timer);
        if (!done) {
          proc.kill("SIGKILL");
          await exited(proc);
        }
      }
      await fake?.stop();
      rmSync(dataDir, { recursive: true, force: true });
    })());

  const deadline = Date.now() + (options.startTimeoutMs ?? 20_000);
  let url: string | undefined;
  while (Date.now() < deadline && proc.exitCode === null && proc.signalCode === null && !spawnError) {
    url = /"msg":"memd started".*"address":"(http:\/\/[^"]+)"/.exec(out)?.[1];
    if (url) break;
    await sleep(10);
  }
  if (!url) {
    await stop();
    throw new Error(`memd did not start${spawnError ? ` (${spawnError.message})` : ""}:\n${out.slice(-2000)}`);
  }
  return {
    url,
    key,
    client: createClient({ url, key }),
    dataDir,
    modelRequests: fake?.requests ?? [],
    logs: () => out,
    stop,
  };
}

/** Reads a request's body as JSON. */
async function jsonBody(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return JSON.parse(Buffer.concat(chunks).toString("utf8"));
}

function sendJson(res: ServerResponse, status: number, body: unknown) {
  const text = JSON.stringify(body);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
  res.end(text);
}

/** A tiny OpenAI-compatible chat-completions server (non-streaming, as memd calls it) replaying a script. */
async function startFakeModel(script: NonNullable<StartOptions["model"]>) {
  const queue = Array.isArray(script) ? [...script] : [];
  const requests: ModelRequest[] = [];
  const server = createServer(async (req, res) => {
    try {
      const path = new URL(req.url ?? "/", "http://fake").pathname;
      if (req.method !== "POST" || !path.endsWith("/chat/completions")) {
        res.writeHead(404, { "content-type": "text/plain" });
        res.end("not found");
        return;
      }
      const request = (await jsonBody(req)) as ModelRequest;
      requests.push(request);
      const next: ScriptedAnswer =
        typeof script === "function" ? script(request) : (queue.shift() ?? { operations: [] });
      if (typeof next === "object" && "status" in next) {
        sendJson(res, next.status, next.body ?? { error: { message: `fake error ${next.status}` } });
        return;
      }
      const content = typeof next === "string" ? next : JSON.stringify(next);
      sendJson(res, 200, {
        id: `chatcmpl-testkit-${requests.length}`,
        object: "chat.completion",
        created: Math.floor(Date.now() / 1000),
        model: request.model,
        choices: [{ index: 0, message: { role: "assistant", content }, finish_reason: "stop" }],
        usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
      });
    } catch (e) {
      sendJson(res, 500, { error: { message: `fake model: ${(e as Error).message}` } });
    }
  });
  await new Promise<void>((done, fail) => {
    server.once("error", fail);
    server.listen(0, "127.0.0.1", () => done());
  });
  const { port } = server.address() as AddressInfo;
  const stop = () =>
    new Promise<void>((done) => {
      server.closeAllConnections();
      server.close(() => done());
    });
  return { url: `http://127.0.0.1:${port}/v1`, requests, stop };
}
