// @targets lmdb binary
// Operator-proofing (issue 8): one server per port and per data dir, a safe start-up order,
// one-line start failures, and the command line around them.
import { afterAll, expect, test } from "bun:test";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { rootSecret, runMemd, spawnServer, tempDir } from "../helpers";

const dirs: (() => void)[] = [];
afterAll(() => {
  for (const cleanup of dirs) cleanup();
});
const fresh = () => {
  const t = tempDir("memd-op-");
  dirs.push(t.cleanup);
  return t.dir;
};

/** Runs a memd command to its end (bounded), with a clean environment. */
const memd = (args: string[], env: Record<string, string> = {}) =>
  runMemd(args, { PATH: process.env.PATH, HOME: process.env.HOME, TMPDIR: process.env.TMPDIR, ...env });

const stop = async (p: { proc: Bun.Subprocess }) => {
  p.proc.kill("SIGTERM");
  return p.proc.exited;
};

test("a second server on a taken port exits 1 with one line, creates nothing, and the first keeps every request", async () => {
  const a = await spawnServer(["--data-dir", fresh()], { MEMD_API_KEY: rootSecret });
  try {
    const port = new URL(a.url).port;
    const dataDir = join(fresh(), "second");
    const b = await memd(["serve", "--host", "127.0.0.1", "--port", port, "--data-dir", dataDir]);
    expect(b.code).toBe(1);
    expect(b.err).toBe(`memd: port ${port} on 127.0.0.1 is already in use\n`);
    expect(b.out).toBe("");
    expect(existsSync(dataDir)).toBe(false);
    // Every request reaches the one server: the same key is accepted 20 times out of 20.
    const statuses = await Promise.all(
      Array.from({ length: 20 }, () =>
        fetch(`${a.url}/v1/keys`, { headers: { authorization: `Bearer ${rootSecret}` } }).then((r) => r.status),
      ),
    );
    expect(statuses).toEqual(Array(20).fill(200));
  } finally {
    await stop(a);
  }
}, 30_000);

test("a data.mdb that is not an LMDB store: exit 1 with one line naming it (not a crash), for serve and the tools", async () => {
  const dir = fresh();
  writeFileSync(join(dir, "data.mdb"), "garbage, not a store\n".repeat(10));
  const file = join(dir, "data.mdb");
  const served = await memd(["serve", "--port", "0", "--data-dir", dir], { MEMD_API_KEY: rootSecret });
  expect([served.code, served.err]).toEqual([
    1,
    `memd: data dir ${dir}: cannot open the store: ${file} is not an LMDB store (damaged, or not written by memd)\n`,
  ]);
  const listed = await memd(["keys", "list", "--data-dir", dir]);
  expect(listed.code).toBe(1);
  expect(listed.err).toContain(`${file} is not an LMDB store`);
});

test("a second server on a data dir in use exits 1 naming the dir and the pid; keys and backup still work beside it", async () => {
  const dir = fresh();
  const a = await spawnServer(["--data-dir", dir], { MEMD_API_KEY: rootSecret });
  try {
    const b = await memd(["serve", "--port", "0", "--data-dir", dir], { MEMD_API_KEY: rootSecret });
    expect(b.code).toBe(1);
    expect(b.err).toBe(`memd: data dir ${dir} is in use by another memd server (pid ${a.proc.pid})\n`);
    expect(b.out).toBe("");
    const keys = await memd(["keys", "list", "--data-dir", dir]);
    expect([keys.code, keys.err]).toEqual([0, ""]);
    const dest = join(fresh(), "copy");
    const backup = await memd(["backup", dest, "--data-dir", dir]);
    expect([backup.code, backup.err]).toEqual([0, ""]);
  } finally {
    expect(await stop(a)).toBe(0);
  }
  // The lock goes with the process, even after kill -9: the next server starts.
  const c = await spawnServer(["--data-dir", dir], { MEMD_API_KEY: rootSecret });
  c.proc.kill("SIGKILL");
  await c.proc.exited;
  const d = await spawnServer(["--data-dir", dir], { MEMD_API_KEY: rootSecret });
  expect(await stop(d)).toBe(0);
}, 30_000);

test("a start that fails on its port prints and creates no root key; the next start prints it", async () => {
  const a = await spawnServer(["--data-dir", fresh()], { MEMD_API_KEY: rootSecret });
  const dir = fresh();
  try {
    const port = new URL(a.url).port;
    const b = await memd(["serve", "--port", port, "--data-dir", dir]);
    expect(b.code).toBe(1);
    expect(b.err).not.toContain("memd_");
  } finally {
    await stop(a);
  }
  const c = await spawnServer(["--data-dir", dir], { MEMD_API_KEY: "" });
  try {
    expect(c.stderr()).toMatch(/created a root key[\s\S]*memd_/);
  } finally {
    await stop(c);
  }
}, 30_000);

test.each([
  ["a file", (d: string) => writeFileSync(join(d, "f"), "x"), "f", "is a file, not a directory"],
  ["under a file", (d: string) => writeFileSync(join(d, "f"), "x"), "f/sub", "is a file, not a directory"],
])("a data dir that is %s: one line naming the path and the cause, exit 1, no port", async (_, setup, sub, cause) => {
  const d = fresh();
  setup(d);
  const path = join(d, sub);
  const r = await memd(["serve", "--port", "0", "--data-dir", path]);
  expect(r.code).toBe(1);
  expect(r.err).toBe(`memd: data dir ${path}: ${cause}\n`);
  expect(r.out).toBe("");
});

test("a data dir that cannot be created (under read-only /sys): one line naming the path and the cause, exit 1", async () => {
  const path = `/sys/memd-test-${process.pid}`;
  const r = await memd(["serve", "--port", "0", "--data-dir", path]);
  expect(r.code).toBe(1);
  expect(r.err).toMatch(new RegExp(`^memd: data dir ${path}: cannot be created: [a-z -]+\n$`));
  expect(r.out).toBe("");
});

test("--llm-model without --llm-base-url exits 2 with a message", async () => {
  const r = await memd(["serve", "--port", "0", "--data-dir", fresh(), "--llm-model", "qwen"]);
  expect(r.code).toBe(2);
  expect(r.err).toContain("--llm-model (MEMD_LLM_MODEL) needs --llm-base-url");
  const env = await memd(["serve", "--port", "0", "--data-dir", fresh()], { MEMD_LLM_MODEL: "qwen" });
  expect(env.code).toBe(2);
});

test("the start-up log names the extractor", async () => {
  const a = await spawnServer(["--data-dir", fresh()], { MEMD_API_KEY: rootSecret });
  await stop(a);
  expect(a.stdout()).toContain('"extractor":"built-in"');
  const b = await spawnServer(["--data-dir", fresh(), "--llm-base-url", "http://127.0.0.1:9/v1", "--llm-model", "m1"], {
    MEMD_API_KEY: rootSecret,
  });
  await stop(b);
  expect(b.stdout()).toContain('"extractor":"m1 at 127.0.0.1:9"');
});

test("the lock file names the pid of the server holding the data dir", async () => {
  const dir = fresh();
  mkdirSync(dir, { recursive: true });
  const a = await spawnServer(["--data-dir", dir], { MEMD_API_KEY: rootSecret });
  try {
    expect(readFileSync(join(dir, "memd.lock"), "utf8").trim()).toBe(String(a.proc.pid));
  } finally {
    await stop(a);
  }
});
