// @targets lmdb postgres pgbouncer binary
// What a newcomer meets first. The server's root sends a browser to the page at /ui. The first
// start prints the root key once, and what to do when it is lost: a command that makes another
// admin key on the same store, which works while the server runs. The printed command is run as
// printed (on PostgreSQL with MEMD_DATABASE_URL set, as the message says), and its key works on
// the running server.
import { afterAll, expect, test } from "bun:test";
import { join } from "node:path";
import { backendArgs, type ServerProcess, spawnServer, tempDir, testBinary } from "../helpers";

const tmp = tempDir("memd-first-start-");
const repo = join(import.meta.dir, "..", "..");
let p: ServerProcess | undefined;
afterAll(async () => {
  p?.proc.kill("SIGTERM");
  await p?.proc.exited;
  tmp.cleanup();
});

test("GET / redirects to the page; the first start says how to replace a lost root key, and that works while it runs", async () => {
  const dataDir = join(tmp.dir, "data");
  const place = await backendArgs(dataDir);
  const databaseUrl = place[1];
  p = await spawnServer(["--data-dir", dataDir, ...place], { MEMD_API_KEY: "" });

  const root = await fetch(`${p.url}/`, { redirect: "manual" });
  expect({ status: root.status, location: root.headers.get("location") }).toEqual({ status: 302, location: "/ui" });
  const followed = await fetch(`${p.url}/`);
  expect(new URL(followed.url).pathname).toBe("/ui");
  expect(await followed.text()).toContain("<title>memd</title>");

  const said = p.stderr();
  const secret = /created a root key \(\w+\); it is shown only this once:\n\n {2}(\S+)\n/.exec(said)?.[1];
  expect(secret).toMatch(/^memd_/);
  expect(said).toContain("If it is lost, make another admin key on the same store (this works while the server runs):");
  const command = /\n {2}(\S+ keys create --name rescue --permission admin --namespace '\*' .+)\n/.exec(said)?.[1];
  expect(command).toBeDefined();
  // The binary names itself; from source, the checkout's bin/memd. The store is this one.
  expect(command!.split(" ")[0]).toBe(testBinary ?? "bin/memd");
  expect(command).toEndWith(databaseUrl ? `--database-url "$MEMD_DATABASE_URL"` : `--data-dir ${dataDir}`);
  // The password of a database URL is never printed.
  if (databaseUrl) expect(said).not.toContain(databaseUrl);

  // "Lost" the root key: the printed command, run as printed, beside the running server.
  const made = Bun.spawnSync(["sh", "-c", command!], {
    cwd: repo,
    env: { ...process.env, MEMD_DATA_DIR: "", MEMD_DATABASE_URL: databaseUrl ?? "" },
    stdout: "pipe",
    stderr: "pipe",
  });
  expect({ code: made.exitCode, err: made.stderr.toString() }).toEqual({ code: 0, err: "" });
  const rescue = /\b(memd_[\w-]+)/.exec(made.stdout.toString())?.[1];
  expect(rescue).toMatch(/^memd_/);
  expect(rescue).not.toBe(secret);
  // The running server takes it at once as an admin key of every namespace.
  const keys = await fetch(`${p.url}/v1/keys`, { headers: { authorization: `Bearer ${rescue}` } });
  expect(keys.status).toBe(200);
  expect(JSON.stringify(await keys.json())).toContain('"rescue"');
}, 60_000);
