import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { SQL } from "bun";
import { StreamHub } from "../src/audit/stream-service";
import { type Config, loadConfig } from "../src/config/config";
import type { Core } from "../src/core";
import { type Running, startServer } from "../src/server";
import { openStorage } from "../src/storage/index";
import type { LmdbStorage } from "../src/storage/lmdb/index";
import type { PostgresStorage } from "../src/storage/postgres/index";
import type { Storage } from "../src/storage/storage";

export const rootSecret = "memd_test_root_key_0123456789abcdef";

/**
 * The storage backend the HTTP tests run on: `lmdb` (default) or `postgres`. `make test` runs each
 * file once per target its first line declares (scripts/test), so each test is written once.
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

/**
 * A new empty database on the PostgreSQL server of `serverUrl` (tests and benchmarks); its URL.
 * With `template`, a copy of that database (which nobody may be connected to).
 */
export async function createDatabase(serverUrl: string, template?: string): Promise<string> {
  const name = `memd_t_${crypto.randomUUID().replaceAll("-", "").slice(0, 16)}`;
  const admin = new SQL(serverUrl);
  try {
    await admin.unsafe(`CREATE DATABASE ${name}${template ? ` TEMPLATE ${template}` : ""}`);
  } finally {
    await admin.close();
  }
  return serverUrl.replace(/\/[^/?]*(\?|$)/, `/${name}$1`);
}

/** A new empty database on the test PostgreSQL; its URL. */
export const freshDatabase = () => createDatabase(postgresUrl());

/** The database this test process migrated once, to copy (see migratedDatabase). */
let migratedTemplate: Promise<string> | undefined;

/**
 * A new database holding memd's schema and nothing else, copied from one that this process
 * migrated once: a server started on it finds its schema current instead of making it (half a
 * second or more per server start, under load). Migrations themselves are tested on
 * freshDatabase (the storage contract, replicas-on-postgres, keyword-terms-upgrade) and behind
 * PgBouncer, where backendArgs keeps fresh databases.
 */
export async function migratedDatabase(): Promise<string> {
  migratedTemplate ??= (async () => {
    const url = await freshDatabase();
    const storage = await openStorage({ dataDir: "/nonexistent", databaseUrl: url });
    await storage.close(); // a template must have no connection
    return new URL(url).pathname.slice(1);
  })();
  return createDatabase(postgresUrl(), await migratedTemplate);
}

/** mulberry32: a small seeded generator of numbers in [0, 1), so a failure or a figure can be replayed. */
export function seededRandom(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** On PostgreSQL, one database per data dir, so a test that restarts on "the same data dir" gets its data back. */
const databaseOf = new Map<string, string>();

/**
 * PgBouncer in transaction mode in front of the test PostgreSQL (scripts/with-pgbouncer), or
 * undefined: `make test` runs the PostgreSQL files once more behind it. Databases are still made
 * on the server itself; servers reach them through PgBouncer.
 */
export function poolerUrl(): string | undefined {
  const url = process.env.MEMD_TEST_POOLER_URL;
  if (url === undefined) return undefined;
  if (!url.startsWith("postgres")) throw new Error(`PgBouncer tests need PgBouncer: ${url}`);
  return url;
}

/** A database URL of the test PostgreSQL as reached through PgBouncer (unchanged without one). */
export function throughPooler(databaseUrl: string): string {
  const pooler = poolerUrl();
  if (!pooler) return databaseUrl;
  const authority = (u: string) => u.replace(/^postgres(ql)?:\/\//, "").split("/")[0];
  return databaseUrl.replace(authority(databaseUrl), authority(pooler));
}

/** Settings that put a test server on the backend under test, for the data dir `dataDir`. */
export async function backendArgs(dataDir: string): Promise<string[]> {
  if (backend !== "postgres") return [];
  let url = databaseOf.get(dataDir);
  if (!url) {
    url = poolerUrl() ? throughPooler(await freshDatabase()) : await migratedDatabase();
    databaseOf.set(dataDir, url);
  }
  return ["--database-url", url, ...(poolerUrl() ? ["--database-pooler", "transaction"] : [])];
}

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

/**
 * Runs a memd command (memdCommand, from the repo root) with exactly the environment `env`, to
 * its end or for at most 20 s; its output and exit code.
 */
export async function runMemd(args: string[], env: Record<string, string | undefined>) {
  const proc = Bun.spawn(memdCommand(...args), { cwd: repo, env, stdout: "pipe", stderr: "pipe" });
  const timer = setTimeout(() => proc.kill("SIGKILL"), 20_000);
  const [out, err, code] = await Promise.all([
    new Response(proc.stdout).text(),
    new Response(proc.stderr).text(),
    proc.exited,
  ]);
  clearTimeout(timer);
  return { out, err, code };
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

/** The value of the unlabelled metric `name` in a /metrics text (NaN when it is not there). */
export const metricIn = (text: string, name: string): number =>
  Number(new RegExp(`^${name} (\\S+)$`, "m").exec(text)?.[1]);

/** The search-memory budget's figures from a server's /metrics (issue 32). */
export async function searchMemoryMetrics(t: Pick<TestServer, "api">) {
  const text = await (await t.api("GET", "/metrics")).text();
  const num = (name: string) => metricIn(text, name);
  return {
    budget: num("memd_search_memory_budget_bytes"),
    held: num("memd_search_memory_held_bytes"),
    namespaces: num("memd_search_memory_namespaces"),
    evictions: num("memd_search_memory_evictions_total"),
    smallBudget: num("memd_search_memory_small_budget_bytes"),
  };
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
  const args = ["--port", "0", "--data-dir", dataDir, ...(await backendArgs(dataDir)), ...(options.args ?? [])];
  const env = { MEMD_API_KEY: rootSecret, MEMD_LOG_LEVEL: "info", ...options.env };
  const config = loadConfig(args, env);
  const server = testBinary
    ? await startBinaryServer(args, env, config, logs)
    : await startServer(
        config,
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
    databaseUrl: config.databaseUrl,
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
 * The binary under test as a TestServer: `server.core.storage` is the same storage opened in
 * this process (LMDB allows several processes), for tests that seed keys or inspect records.
 */
async function startBinaryServer(args: string[], env: Record<string, string>, config: Config, logs: string[]) {
  const p = await startProcess([testBinary!, "serve", ...args], {
    cwd: repo,
    env: { PATH: process.env.PATH, HOME: process.env.HOME, TMPDIR: process.env.TMPDIR, ...env },
    onLine: (line) => line && logs.push(line),
  });
  const port = Number(new URL(p.url).port);
  const storage = await openStorage(config);
  const core = { storage } as unknown as Core;
  const server: Running = {
    url: p.url,
    port,
    core,
    // The binary's streams live in its own process; stop() ends them there.
    streams: new StreamHub(),
    async stop() {
      if (p.proc.exitCode === null) {
        p.proc.kill("SIGTERM");
        await p.proc.exited;
      }
      await storage.close();
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
  // Generous: a loaded machine (CI, or several test runs at once) can take many seconds to start Bun.
  const deadline = Date.now() + 60_000;
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

/**
 * Waits (bounded, 30 s) until the server has embedded every memory stored so far (`/metrics`:
 * memd_embed_pending 0). A search waits for the built-in embedder's backlog at most a second,
 * which a loaded machine can outlast: a test of what a search ranks waits here first, unless
 * that wait is what it tests.
 */
export async function untilEmbedded(s: TestServer): Promise<void> {
  for (let i = 0; ; i++) {
    const m = await (await s.api("GET", "/metrics")).text();
    if (Number(/^memd_embed_pending (\d+)$/m.exec(m)?.[1]) === 0) return;
    if (i === 600) throw new Error("the stored memories were not embedded within 30 s");
    await Bun.sleep(50);
  }
}

/**
 * Waits (bounded, 30 s: a loaded machine needs it when the embedding thread starts from source;
 * 5 s let a dump be taken with memories still pending under load 15-18) until `storage`'s
 * embedding queue is empty.
 */
export async function untilNonePending(storage: Storage): Promise<void> {
  for (let i = 0; (await storage.pendingEmbeddings(1)).length > 0; i++) {
    if (i === 3000) throw new Error("memories still waiting for their embedding after 30 s");
    await Bun.sleep(10);
  }
}

/**
 * Every record a storage holds, as one string, to prove that a failed request changed nothing:
 * on LMDB every byte of every sub-database, on PostgreSQL every row of every table.
 */
export async function dumpStorage(storage: Storage): Promise<string> {
  // The built-in embedder embeds stored memories just after their commit (src/embedding/worker.ts):
  // a dump waits for that queue to empty, so it is not taken halfway through it.
  await untilNonePending(storage);
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
