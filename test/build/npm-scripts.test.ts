// `npm test`, `npm run build` and `npm run serve` work on a machine with only Node.js and npm:
// the package scripts go through make, and make runs the Bun it installs into .tools/ (by its
// path) when there is no bun on PATH. They used to call a bare `bun`, which failed with
// "bun: not found".
import { expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";

const repo = join(import.meta.dir, "..", "..");

test("every script of the server's and the client's package.json goes through make", async () => {
  const server = (await Bun.file(join(repo, "package.json")).json()).scripts as Record<string, string>;
  const client = (await Bun.file(join(repo, "client/package.json")).json()).scripts as Record<string, string>;
  expect(Object.keys(server).sort()).toEqual(["build", "serve", "start", "test"]);
  // `npm start`, what a newcomer types first, runs the server as `make run` does.
  expect(server.start).toBe("make run");
  for (const [name, command] of Object.entries(server))
    expect({ name, command }).toEqual({ name, command: expect.stringMatching(/^make /) });
  for (const [name, command] of Object.entries(client))
    expect({ name, command }).toEqual({ name, command: expect.stringMatching(/^make -C \.\. /) });
});

test("without bun on PATH, make runs Bun by its path", () => {
  const p = Bun.spawnSync(["make", "-n", "build", "run"], {
    cwd: repo,
    env: { PATH: "/usr/local/bin:/usr/bin:/bin", HOME: process.env.HOME },
    stdout: "pipe",
    stderr: "pipe",
  });
  expect(p.exitCode).toBe(0);
  const lines = p.stdout.toString().split("\n");
  expect(lines.filter((l) => /(^|\s)bun /.test(l))).toEqual([]);
  // .tools' Bun, or one found elsewhere on the PATH make was given: by its path either way.
  expect(lines.filter((l) => l.includes("run scripts/build.ts"))).toEqual([
    expect.stringMatching(/^\/\S*\/bun run scripts\/build\.ts$/),
  ]);
});

test("`make help` lists every target, each with what it does", () => {
  const p = Bun.spawnSync(["make", "--no-print-directory", "help"], { cwd: repo, stdout: "pipe", stderr: "pipe" });
  expect(p.exitCode).toBe(0);
  const listed = new Map(
    p.stdout
      .toString()
      .split("\n")
      .map((l) => /^\s+make (\S+)\s+(.+)$/.exec(l))
      .filter((m) => m !== null)
      .map((m) => [m[1], m[2]]),
  );
  const makefile = readFileSync(join(repo, "Makefile"), "utf8");
  const targets = [...makefile.matchAll(/^([a-z][a-z-]*):/gm)].map((m) => m[1]);
  expect(targets.length).toBeGreaterThan(10);
  for (const target of targets) expect({ target, listed: listed.has(target) }).toEqual({ target, listed: true });
  for (const target of ["run", "test", "build", "deps"]) expect(listed.get(target)).toBeTruthy();
});

test("npm on Node 20: the engines field holds, and npm in this checkout reports errors only", () => {
  const pkg = JSON.parse(readFileSync(join(repo, "package.json"), "utf8"));
  const node = Bun.spawnSync(["/usr/bin/node", "--version"]).stdout.toString().trim();
  expect(node).toMatch(/^v2\d\./);
  expect({ node, fits: Bun.semver.satisfies(node.slice(1), pkg.engines.node) }).toEqual({ node, fits: true });
  // Dependencies that declare engines.node >=22 (run by Bun, never by Node) made a plain
  // `npm install` print about 150 lines of EBADENGINE warnings on Node 20.
  const loglevel = Bun.spawnSync(["npm", "config", "get", "loglevel"], { cwd: repo, stdout: "pipe" });
  expect(loglevel.stdout.toString().trim()).toBe("error");
});
