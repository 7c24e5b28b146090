import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SQL } from "bun";
import { loadConfig } from "../src/config/config";
import { type Running, startServer } from "../src/server";
import type { LmdbStorage } from "../src/storage/lmdb/index";
import type { PostgresStorage } from "../src/storage/postgres/index";
import type { Storage } from "../src/storage/storage";

export const rootSecret = "memd_test_root_key_0123456789abcdef";

/**
 * The storage backend the HTTP tests run on: `lmdb` (default) or `postgres`. `make test` runs the
 * HTTP test files once per backend (scripts/test), so each test is written once.
 */
export const backend = (process.env.MEMD_TEST_BACKEND ?? "lmdb") as "lmdb" | "postgres";

/** The throwaway PostgreSQL that scripts/with-postgres started, or an error saying why there is none. */
export function postgresUrl(): string {
  const url = process.env.MEMD_TEST_DATABASE_URL;
  if (!url?.startsWith("postgres"))
    throw new Error(
      `PostgreSQL tests need a server: ${url ?? "MEMD_TEST_DATABASE_URL is not set; run them with make test, which starts one (scripts/with-postgres)"}`,
    );
  return url;
}

/** A new empty database on the test PostgreSQL; its URL. */
export async function freshDatabase(): Promise<string> {
  const url = postgresUrl();
  const name = `memd_t_${crypto.randomUUID().replaceAll("-", "").slice(0, 16)}`;
  const admin = new SQL(url);
  try {
    await admin.unsafe(`CREATE DATABASE ${name}`);
  } finally {
    await admin.close();
  }
  return url.replace(/\/[^/?]*(\?|$)/, `/${name}$1`);
}

/** On PostgreSQL, one database per data dir, so a test that restarts on "the same data dir" gets its data back. */
const databaseOf = new Map<string, string>();

/** Settings that put a test server on the backend under test, for the data dir `dataDir`. */
export async function backendArgs(dataDir: string): Promise<string[]> {
  if (backend !== "postgres") return [];
  let url = databaseOf.get(dataDir);
  if (!url) {
    url = await freshDatabase();
    databaseOf.set(dataDir, url);
  }
  return ["--database-url", url];
}

/** A fresh temp data dir; removed by `cleanup()`. */
export function tempDir(prefix = "memd-test-"): { dir: string; cleanup: () => void } {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  return { dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

export interface TestServer {
  url: string;
  dataDir: string;
  /** The server's database on the postgres backend; memd commands get it as MEMD_DATABASE_URL. */
  databaseUrl?: string;
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
  const config = loadConfig(
    ["--port", "0", "--data-dir", dataDir, ...(await backendArgs(dataDir)), ...(options.args ?? [])],
    {
      MEMD_API_KEY: rootSecret,
      MEMD_LOG_LEVEL: "info",
      ...options.env,
    },
  );
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
    databaseUrl: config.databaseUrl,
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

/**
 * Every record a storage holds, as one string, to prove that a failed request changed nothing:
 * on LMDB every byte of every sub-database, on PostgreSQL every row of every table.
 */
export async function dumpStorage(storage: Storage): Promise<string> {
  const out: string[] = [];
  if (storage.backend === "lmdb") {
    for (const [name, db] of Object.entries((storage as LmdbStorage).dbs))
      for (const key of db.getKeys({}))
        out.push(`${name} ${JSON.stringify(key)} ${Buffer.from(db.getBinary(key)!).toString("hex")}`);
    return out.join("\n");
  }
  const { sql } = storage as PostgresStorage;
  const tables = await sql`SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename`;
  for (const { tablename } of tables)
    for (const row of await sql.unsafe(`SELECT * FROM "${tablename}" ORDER BY 1`))
      out.push(`${tablename} ${JSON.stringify(row)}`);
  return out.join("\n");
}
