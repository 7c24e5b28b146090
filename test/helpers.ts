import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadConfig } from "../src/config/config";
import { type Running, startServer } from "../src/server";

export const rootSecret = "memd_test_root_key_0123456789abcdef";

/** A fresh temp data dir; removed by `cleanup()`. */
export function tempDir(prefix = "memd-test-"): { dir: string; cleanup: () => void } {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  return { dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

export interface TestServer {
  url: string;
  dataDir: string;
  server: Running;
  logs: string[];
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
 * Starts a real server in this process, listening on 127.0.0.1 with a free port, on a temp data
 * dir (or `dataDir`), with the test root key. Extra settings go through the same loader as flags.
 */
export async function startTestServer(
  options: { dataDir?: string; env?: Record<string, string>; args?: string[] } = {},
): Promise<TestServer> {
  const tmp = options.dataDir ? undefined : tempDir();
  const dataDir = options.dataDir ?? tmp!.dir;
  const logs: string[] = [];
  const config = loadConfig(["--port", "0", "--data-dir", dataDir, ...(options.args ?? [])], {
    MEMD_API_KEY: rootSecret,
    MEMD_LOG_LEVEL: "info",
    ...options.env,
  });
  const server = await startServer(
    config,
    (l) => logs.push(l),
    (line) => logs.push(line),
  );
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

export interface ServerProcess {
  proc: Bun.Subprocess<"ignore", "pipe", "pipe">;
  url: string;
  stdout(): string;
  stderr(): string;
}

/** Spawns a memd command line and waits for the start-up log line that carries its address. */
export async function startProcess(
  cmd: string[],
  options: { cwd: string; env: Record<string, string | undefined> },
): Promise<ServerProcess> {
  const proc = Bun.spawn(cmd, { cwd: options.cwd, env: options.env, stdin: "ignore", stdout: "pipe", stderr: "pipe" });
  let out = "";
  let err = "";
  const drain = async (s: ReadableStream<Uint8Array>, into: (t: string) => void) => {
    const dec = new TextDecoder();
    for await (const chunk of s) into(dec.decode(chunk, { stream: true }));
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

/** Runs `bun run src/main.ts serve` as a child process, as users do, and waits for it to listen. */
export function spawnServer(args: string[], env: Record<string, string> = {}) {
  return startProcess([process.execPath, "run", "src/main.ts", "serve", "--port", "0", ...args], {
    cwd: join(import.meta.dir, ".."),
    env: { ...process.env, MEMD_LOG_LEVEL: "info", ...env },
  });
}
