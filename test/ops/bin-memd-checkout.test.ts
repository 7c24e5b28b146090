// bin/memd: the command of a source checkout, which finds the Bun that make installed.
import { expect, test } from "bun:test";

test("bin/memd runs memd from the source checkout without Bun on PATH", () => {
  const root = `${import.meta.dir}/../..`;
  const p = Bun.spawnSync([`${root}/bin/memd`, "--version"], { cwd: "/", env: { PATH: "/usr/bin:/bin" } });
  expect(p.exitCode).toBe(0);
  expect(p.stdout.toString()).toMatch(/^memd \d+\.\d+\.\d+ /);
});
