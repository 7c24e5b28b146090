// `npm test`, `npm run build` and `npm run serve` work on a machine with only Node.js and npm:
// the package scripts go through make, and make runs the Bun it installs into .tools/ (by its
// path) when there is no bun on PATH. They used to call a bare `bun`, which failed with
// "bun: not found".
import { expect, test } from "bun:test";
import { join } from "node:path";

const repo = join(import.meta.dir, "..", "..");

test("every script of the server's and the client's package.json goes through make", async () => {
  const server = (await Bun.file(join(repo, "package.json")).json()).scripts as Record<string, string>;
  const client = (await Bun.file(join(repo, "client/package.json")).json()).scripts as Record<string, string>;
  expect(Object.keys(server).sort()).toEqual(["build", "serve", "test"]);
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
