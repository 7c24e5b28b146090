// make test checks first for the tools the suite needs (scripts/check-test-tools): silent when
// all are there; else one message naming each missing tool and how to install it, and exit 1.
import { expect, test } from "bun:test";
import { join } from "node:path";

const script = join(import.meta.dir, "..", "..", "scripts", "check-test-tools");
const run = (env: Record<string, string | undefined>) => {
  const p = Bun.spawnSync([script], { env, stdout: "pipe", stderr: "pipe" });
  return { code: p.exitCode, out: p.stdout.toString(), err: p.stderr.toString() };
};

test("on this machine every tool is there: nothing said, exit 0", () => {
  expect(run(process.env)).toEqual({ code: 0, out: "", err: "" });
});

test("missing tools are named, each with how to install it", () => {
  // runuser lives in /usr/sbin, left off this PATH; the browser and Python are named elsewhere.
  const r = run({ PATH: "/usr/bin:/bin", CHROMIUM: "/nowhere/chromium", PYTHON: "/nowhere/python3" });
  expect(r.code).toBe(1);
  expect(r.out).toBe("");
  expect(r.err).toStartWith("make test: these tools are missing");
  expect(r.err).toContain(
    "runuser (runs the test PostgreSQL as the postgres user)\n      install: apt-get install -y util-linux",
  );
  expect(r.err).toContain("Chromium at /nowhere/chromium");
  expect(r.err).toContain("install: make browser-deps (apt-get install -y chromium)");
  expect(r.err).toContain("/nowhere/python3 with httpx and pytest");
  expect(r.err).toContain("install: make python-deps");
  // What is there is not named.
  expect(r.err).not.toContain("initdb");
});
