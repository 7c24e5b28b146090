// @targets lmdb binary
// The search-memory budget's setting (issue 32), as an operator meets it: `memd serve --help`
// lists --search-memory-mb and MEMD_SEARCH_MEMORY_MB with the default (256 MiB); a value that is
// not a whole number of MiB from 1 up, by either spelling, stops the start with one line naming
// the setting and the value (exit 2, nothing created); a good one is the budget /metrics shows,
// the flag winning over the variable.
import { afterAll, expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { rootSecret, runMemd, spawnServer, tempDir } from "../helpers";

const tmp = tempDir("memd-budget-");
afterAll(() => tmp.cleanup());
const clean = { PATH: process.env.PATH, HOME: process.env.HOME, TMPDIR: process.env.TMPDIR };

test("memd serve --help lists the flag, its variable and its default", async () => {
  const help = await runMemd(["serve", "--help"], clean);
  expect(help.code).toBe(0);
  const line = help.out.split("\n").find((l) => l.includes("--search-memory-mb"));
  expect(line).toContain("MEMD_SEARCH_MEMORY_MB");
  expect(line).toContain("(default: 256)");
});

test("a bad value, by flag or by variable, stops the start with one line naming it (exit 2, nothing created)", async () => {
  const dir = join(tmp.dir, "never");
  for (const value of ["0", "-1", "abc", "1.5", "64MB", "2000000"]) {
    const byFlag = await runMemd(["serve", "--port", "0", "--data-dir", dir, "--search-memory-mb", value], clean);
    const byEnv = await runMemd(["serve", "--port", "0", "--data-dir", dir], {
      ...clean,
      MEMD_SEARCH_MEMORY_MB: value,
    });
    for (const [name, r] of [
      ["--search-memory-mb", byFlag],
      ["MEMD_SEARCH_MEMORY_MB", byEnv],
    ] as const) {
      expect({ value, code: r.code }).toEqual({ value, code: 2 });
      expect(r.err.split("\n")[0]).toBe(`memd: ${name}: expected a whole number from 1 to 1048576, got "${value}"`);
    }
  }
  expect(existsSync(dir)).toBe(false);
});

test("the budget /metrics shows: the default, the variable's, and the flag's over the variable's", async () => {
  const budget = async (args: string[], env: Record<string, string>) => {
    const s = await spawnServer(["--data-dir", join(tmp.dir, "run"), "--embedder", "none", ...args], {
      MEMD_API_KEY: rootSecret,
      ...env,
    });
    try {
      const text = await (
        await fetch(`${s.url}/metrics`, { headers: { authorization: `Bearer ${rootSecret}` } })
      ).text();
      return Number(/^memd_search_memory_budget_bytes (\d+)$/m.exec(text)?.[1]);
    } finally {
      s.proc.kill("SIGTERM");
      await s.proc.exited;
    }
  };
  expect(await budget([], {})).toBe(256 * 2 ** 20);
  expect(await budget([], { MEMD_SEARCH_MEMORY_MB: "64" })).toBe(64 * 2 ** 20);
  expect(await budget(["--search-memory-mb", "3"], { MEMD_SEARCH_MEMORY_MB: "64" })).toBe(3 * 2 ** 20);
});
