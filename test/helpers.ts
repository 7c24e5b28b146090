import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { loadConfig } from "../src/config/config";
import type { Core } from "../src/core";
import { type Running, startServer } from "../src/server";
import { openStore, type Store } from "../src/storage/store";

export const rootSecret = "memd_test_root_key_0123456789abcdef";

const repo = join(import.meta.dir, "..");

/**
 * The contract suite runs twice in `make test`: against the source (in this process), and with
 * MEMD_TEST_BINARY=dist/memd against the compiled binary, each server a child process. Every
 * helper below picks the one or the other, so a test file is written once.
 */
export const testBinary = process.env.MEMD_TEST_BINARY ? resolve(process.env.MEMD_TEST_BINARY) : undefined;
if (testBinary && !existsSync(testBinary))
  throw new Error(`MEMD_TEST_BINARY=${testBinary} does not exist; run make build first`);

/** The memd command line: the binary under test, or `bun run src/main.ts`. Run it with cwd = repo root. */
export const memdCommand = (...args: string[]) =>
  testBinary ? [testBinary, ...args] : [process.execPath, "run", join(repo, "src/main.ts"), ...args];

/** A fresh temp data dir; removed by `cleanup()`. */
export function tempDir(prefix = "memd-test-"): { dir: string; cleanup: () => void } {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  return { dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

export interface TestServer {
  url: string;
  dataDir: string;
  server: Running;
  /** Log lines (JSON) and anything printed on stderr; call settleLogs() before reading them. */
  logs: string[];
  /** Resolves once every request answered so far has its log line in `logs`. */
  settleLogs(): Promise<void>;
  /** fetch with the root key and JSON body by default. */
  api(
    method: string,
    path: string,
    body?: unknown,
    init?: { key?: string | null; headers?: Record<string, string> },
  ): Promise<Response>;
  json<T = any>(
    method: string,
    path: string,
    body?: unknown,
    init?: { key?: string | null },
  ): Promise<{ status: number; body: T; headers: Headers }>;
  stop(): Promise<void>;
}

/**
 * Starts a real server listening on 127.0.0.1 with a free port, on a temp data dir (or
 * `dataDir`), with the test root key: in this process, or the binary under test as a child
 * process (see testBinary). Extra settings go through the same loader as flags.
 */
export async function startTestServer(
  options: { dataDir?: string; env?: Record<string, string>; args?: string[] } = {},
): Promise<TestServer> {
  const tmp = options.dataDir ? undefined : tempDir();
  const dataDir = options.dataDir ?? tmp!.dir;
  const logs: string[] = [];
  const args = ["--port", "0", "--data-dir", dataDir, ...(options.args ?? [])];
  const env = { MEMD_API_KEY: rootSecret, MEMD_LOG_LEVEL: "info", ...options.env };
  const server = testBinary
    ? await startBinaryServer(args, env, dataDir, logs)
    : await startServer(
        loadConfig(args, env),
        (l) => logs.push(l),
        (line) => logs.push(line),
      );
  let settles = 0;
  // Request lines are written after the answer is sent: a marked request, once its own line is
  // in, tells that the lines of every request answered before it are in too.
  const settle = async (url: string) => {
    const id = `settle-${process.pid}-${++settles}`;
    await (await fetch(`${url}/healthz`, { headers: { "x-request-id": id } })).text();
    const deadline = Date.now() + 5000;
    while (!logs.some((l) => l.includes(`"requestId":"${id}"`))) {
      if (Date.now() > deadline) throw new Error("the server did not log a request within 5 s");
      await Bun.sleep(5);
    }
  };
  const api: TestServer["api"] = (method, path, body, init = {}) => {
    const headers: Record<string, string> = { ...init.headers };
    const key = init.key === undefined ? rootSecret : init.key;
    if (key !== null) headers.authorization = `Bearer ${key}`;
    if (body !== undefined && init.headers === undefined) headers["content-type"] = "application/json";
    return fetch(server.url + path, {
      method,
      headers,
      body:
        body === undefined
          ? undefined
          : typeof body === "string" || body instanceof Uint8Array
            ? body
            : JSON.stringify(body),
    });
  };
  return {
    url: server.url,
    dataDir,
    server,
    logs,
    settleLogs: () => settle(server.url),
    api,
    async json(method, path, body, init) {
      const res = await api(method, path, body, init);
      const text = await res.text();
      return { status: res.status, body: text ? JSON.parse(text) : undefined, headers: res.headers };
    },
    async stop() {
      await server.stop();
      tmp?.cleanup();
    },
  };
}

/**
 * The binary under test as a TestServer: `server.core.store` is the same data dir opened in
 * this process (LMDB allows several processes), for tests that seed keys or inspect records.
 */
async function startBinaryServer(args: string[], env: Record<string, string>, dataDir: string, logs: string[]) {
  const p = await startProcess([testBinary!, "serve", ...args], {
    cwd: repo,
    env: { PATH: process.env.PATH, HOME: process.env.HOME, TMPDIR: process.env.TMPDIR, ...env },
    onLine: (line) => line && logs.push(line),
  });
  const port = Number(new URL(p.url).port);
  let store: Store | undefined;
  const core = {
    get store() {
      store ??= openStore(dataDir);
      return store;
    },
  } as unknown as Core;
  const server: Running = {
    url: p.url,
    port,
    core,
    async stop() {
      if (p.proc.exitCode === null) {
        p.proc.kill("SIGTERM");
        await p.proc.exited;
      }
      await store?.close();
      store = undefined;
    },
  };
  return server;
}

export interface ServerProcess {
  proc: Bun.Subprocess<"ignore", "pipe", "pipe">;
  url: string;
  stdout(): string;
  stderr(): string;
}

/** Spawns a memd command line and waits for the start-up log line that carries its address. */
export async function startProcess(
  cmd: string[],
  options: { cwd: string; env: Record<string, string | undefined>; onLine?: (line: string) => void },
): Promise<ServerProcess> {
  const proc = Bun.spawn(cmd, { cwd: options.cwd, env: options.env, stdin: "ignore", stdout: "pipe", stderr: "pipe" });
  let out = "";
  let err = "";
  const drain = async (s: ReadableStream<Uint8Array>, into: (t: string) => void) => {
    const dec = new TextDecoder();
    let partial = "";
    for await (const chunk of s) {
      const text = dec.decode(chunk, { stream: true });
      into(text);
      if (!options.onLine) continue;
      const lines = (partial + text).split("\n");
      partial = lines.pop()!;
      for (const line of lines) options.onLine(line);
    }
  };
  void drain(proc.stdout, (t) => (out += t));
  void drain(proc.stderr, (t) => (err += t));
  const deadline = Date.now() + 15_000;
  while (Date.now() < deadline) {
    const m = /"msg":"memd started".*"address":"(http:\/\/[^"]+)"/.exec(out);
    if (m) return { proc, url: m[1], stdout: () => out, stderr: () => err };
    if (proc.exitCode !== null) break;
    await Bun.sleep(10);
  }
  proc.kill("SIGKILL");
  throw new Error(`memd did not start: ${err}${out}`);
}

/** Runs `memd serve` (source or the binary under test) as a child process, as users do, and waits for it to listen. */
export function spawnServer(args: string[], env: Record<string, string> = {}) {
  return startProcess(memdCommand("serve", "--port", "0", ...args), {
    cwd: repo,
    env: { ...process.env, MEMD_LOG_LEVEL: "info", ...env },
  });
}
