// The built binary, as a user meets it: copied alone into an empty directory, started with a
// near-empty environment, used over HTTP, restarted, and everything is found again.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { copyFileSync, mkdirSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { buildBinary, call, startBinary } from "../binary-helpers";
import { tempDir } from "../helpers";

const tmp = tempDir("memd-binary-");
let bin: string;
let runDir: string;

beforeAll(() => {
  const built = buildBinary(join(tmp.dir, "build", "memd"));
  runDir = join(tmp.dir, "run");
  mkdirSync(runDir);
  bin = join(runDir, "memd");
  copyFileSync(built, bin);
}, 120_000);
afterAll(() => tmp.cleanup());

const run = (...args: string[]) => {
  const p = Bun.spawnSync([bin, ...args], { cwd: runDir, env: { PATH: "/usr/bin:/bin" } });
  return { code: p.exitCode, out: p.stdout.toString(), err: p.stderr.toString() };
};

test.each([
  [["--version"], 0, /^memd \d+\.\d+\.\d+ \([0-9a-f]{7,}|unknown\)\n$/],
  [["version"], 0, /^memd \d+\.\d+\.\d+ /],
  [["--help"], 0, /Usage:[\s\S]*memd version/],
  [["serve", "--help"], 0, /--data-dir[\s\S]*MEMD_METRICS_PUBLIC/],
  // Every command answers --help with its usage.
  ...["keys", "backup", "export", "import", "compact", "reindex", "mcp"].map(
    (c) => [[c, "--help"], 0, new RegExp(`^Usage:\\s+memd ${c}`)] as [string[], number, RegExp],
  ),
])("memd %p exits %d", (args, code, out) => {
  const r = run(...args);
  expect(r.code).toBe(code);
  expect(r.out).toMatch(out);
});

test.each([
  [["bogus"]],
  [["--bogus"]],
  [["serve", "--port"]],
  [["serve", "--log-level", "loud"]],
  [["backup"]],
  [["version", "--frob"]],
])("memd %p is refused with a clear message and exit 2", (args) => {
  const r = run(...args);
  expect(r.code).toBe(2);
  expect(r.err).toMatch(/^memd: .+\nRun "memd --help" for usage\.\n$/);
});

test("alone in an empty directory: store, diff, events, restart, everything is there", async () => {
  expect(readdirSync(runDir)).toEqual(["memd"]);
  // First start: no MEMD_API_KEY, so it creates a root key and prints it once on stderr.
  let s = await startBinary(bin, { cwd: runDir, env: { HOME: runDir } });
  const key = /Bearer ([^\s"]+)/.exec(s.stderr())?.[1];
  expect(key).toBeString();

  const ids: string[] = [];
  for (const content of ["likes tea", "lives in Lyon", "works nights"]) {
    const r = await call(s.url, key!, "POST", "/v1/memory", {
      namespace: "bin",
      entity: "u1",
      content,
      infer: false,
      tags: ["t"],
    });
    expect(r.status).toBe(200);
    ids.push(r.body.memories[0].id);
  }
  const diff = await call(s.url, key!, "POST", "/v1/memory/diff", { namespace: "bin", entity: "u1" });
  expect(diff.status).toBe(200);
  expect(diff.body.created.map((c: { id: string }) => c.id)).toEqual(ids);
  const events = await call(s.url, key!, "GET", "/v1/memory/events?namespace=bin");
  expect(events.body.map((e: { memoryId: string }) => e.memoryId)).toEqual([...ids].reverse());
  expect((await call(s.url, key!, "GET", "/readyz")).status).toBe(200);
  expect((await call(s.url, key!, "GET", "/metrics")).status).toBe(200);

  const backup = Bun.spawnSync([bin, "backup", join(tmp.dir, "backup")], {
    cwd: runDir,
    env: { PATH: "/usr/bin:/bin" },
  });
  expect(backup.exitCode).toBe(0);

  s.proc.kill("SIGTERM");
  expect(await s.proc.exited).toBe(0);
  const stopped = s
    .stdout()
    .split("\n")
    .find((l) => l.includes('"memd stopped"'));
  expect(JSON.parse(stopped!)).toMatchObject({ level: "info", dataDir: "./memd-data" });
  expect(readdirSync(runDir).sort()).toEqual(["memd", "memd-data"]);

  // Restart on the same data dir: the stored key and every record are still there.
  s = await startBinary(bin, { cwd: runDir, env: { HOME: runDir } });
  try {
    expect(s.stderr()).not.toContain("Bearer");
    for (const id of ids) expect((await call(s.url, key!, "GET", `/v1/memory/${id}`)).body.id).toBe(id);
    expect(await call(s.url, key!, "POST", "/v1/memory/diff", { namespace: "bin", entity: "u1" })).toEqual(diff);
    expect(await call(s.url, key!, "GET", "/v1/memory/events?namespace=bin")).toEqual(events);
  } finally {
    s.proc.kill("SIGTERM");
    await s.proc.exited;
  }

  // The backup taken while serving is a store of its own.
  s = await startBinary(bin, {
    cwd: runDir,
    args: ["--data-dir", join(tmp.dir, "backup")],
    env: { MEMD_API_KEY: "memd_backup_check_key_0123456789" },
  });
  try {
    const r = await call(s.url, "memd_backup_check_key_0123456789", "GET", "/v1/memory/events?namespace=bin");
    expect(r.body.length).toBe(3);
  } finally {
    s.proc.kill("SIGTERM");
    await s.proc.exited;
  }
}, 60_000);

test("a missing or unwritable TMPDIR: the embedded addon loads from elsewhere; --version always works", () => {
  const env = { PATH: "/usr/bin:/bin", TMPDIR: join(tmp.dir, "no-such-dir") };
  const version = Bun.spawnSync([bin, "--version"], { cwd: runDir, env });
  expect([version.exitCode, version.stderr.toString()]).toEqual([0, ""]);
  const keys = Bun.spawnSync([bin, "keys", "list", "--data-dir", join(tmp.dir, "tmpdir-check")], { cwd: runDir, env });
  expect(keys.stderr.toString()).not.toContain("bunfs");
  expect(keys.stderr.toString().split("\n").filter(Boolean).length).toBeLessThanOrEqual(2);
  const create = Bun.spawnSync(
    [
      bin,
      "keys",
      "create",
      "--name",
      "t",
      "--permission",
      "read",
      "--namespace",
      "*",
      "--data-dir",
      join(tmp.dir, "tmpdir-check"),
    ],
    { cwd: runDir, env },
  );
  expect([create.exitCode, create.stderr.toString()]).toEqual([0, ""]);
});
