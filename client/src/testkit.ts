// @memd/client/testkit: a real, throwaway memd for your own `bun test`.
//
//   const memd = await startMemd();
//   await memd.client.store({ namespace: "app", entity: "u1", content: "likes tea", infer: false });
//   await memd.stop();
//
// Runs under Bun (it spawns the server with Bun.spawn). The server is the memd binary given as
// `bin`, else the one MEMD_BIN names, else `memd` on PATH (see findMemd).
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
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
  const onPath = Bun.which("memd");
  if (onPath) return onPath;
  throw new Error(
    "memd test kit: no memd to run. Set MEMD_BIN to a memd binary (a release's memd-<version>-linux-x64, " +
      "dist/memd after make build, or bin/memd in a checkout), or put memd on PATH; neither is there now.",
  );
}

/** Starts memd on a free port with a temp data dir and a fresh root key; see `Memd`. */
export async function startMemd(options: StartOptions = {}): Promise<Memd> {
  const cmd = [findMemd(options.bin), "serve"];
  const dataDir = mkdtempSync(join(tmpdir(), "memd-testkit-"));
  const key = `memd_testkit_${crypto.randomUUID().replaceAll("-", "")}`;
  const fake = options.model ? startFakeModel(options.model) : undefined;
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? "/usr/bin:/bin",
    MEMD_API_KEY: key,
    MEMD_LOG_LEVEL: "info",
    ...(fake ? { MEMD_LLM_BASE_URL: fake.url, MEMD_LLM_MODEL: "fake", MEMD_LLM_API_KEY: "fake" } : {}),
    ...options.env,
  };
  const proc = Bun.spawn(
    [...cmd, "--host", "127.0.0.1", "--port", "0", "--data-dir", dataDir, ...(options.args ?? [])],
    {
      cwd: dataDir,
      env,
      stdin: "ignore",
      stdout: "pipe",
      stderr: "pipe",
    },
  );
  let out = "";
  const drain = async (s: ReadableStream<Uint8Array>) => {
    const dec = new TextDecoder();
    for await (const chunk of s) out += dec.decode(chunk, { stream: true });
  };
  void drain(proc.stdout);
  void drain(proc.stderr);

  let stopped: Promise<void> | undefined;
  const stop = () =>
    (stopped ??= (async () => {
      proc.kill("SIGTERM");
      const exited = await Promise.race([proc.exited.then(() => true), Bun.sleep(10_000).then(() => false)]);
      if (!exited) {
        proc.kill("SIGKILL");
        await proc.exited;
      }
      await fake?.stop();
      rmSync(dataDir, { recursive: true, force: true });
    })());

  const deadline = Date.now() + (options.startTimeoutMs ?? 20_000);
  let url: string | undefined;
  while (Date.now() < deadline && proc.exitCode === null) {
    url = /"msg":"memd started".*"address":"(http:\/\/[^"]+)"/.exec(out)?.[1];
    if (url) break;
    await Bun.sleep(10);
  }
  if (!url) {
    await stop();
    throw new Error(`memd did not start:\n${out.slice(-2000)}`);
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

/** A tiny OpenAI-compatible chat-completions server (non-streaming, as memd calls it) replaying a script. */
function startFakeModel(script: NonNullable<StartOptions["model"]>) {
  const queue = Array.isArray(script) ? [...script] : [];
  const requests: ModelRequest[] = [];
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    async fetch(req) {
      if (req.method !== "POST" || !new URL(req.url).pathname.endsWith("/chat/completions"))
        return new Response("not found", { status: 404 });
      const request = (await req.json()) as ModelRequest;
      requests.push(request);
      const next: ScriptedAnswer =
        typeof script === "function" ? script(request) : (queue.shift() ?? { operations: [] });
      if (typeof next === "object" && "status" in next)
        return Response.json(next.body ?? { error: { message: `fake error ${next.status}` } }, { status: next.status });
      const content = typeof next === "string" ? next : JSON.stringify(next);
      return Response.json({
        id: `chatcmpl-testkit-${requests.length}`,
        object: "chat.completion",
        created: Math.floor(Date.now() / 1000),
        model: request.model,
        choices: [{ index: 0, message: { role: "assistant", content }, finish_reason: "stop" }],
        usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
      });
    },
  });
  return { url: `http://127.0.0.1:${server.port}/v1`, requests, stop: () => server.stop(true) };
}
