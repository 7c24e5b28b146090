// The set-up scripts make test runs first tell the truth: make python-deps installs nothing when
// every module is there (each probed on its own), and scripts/with-pgbouncer names PgBouncer's
// own reason when it does not start.
import { expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const repo = join(import.meta.dir, "..", "..");

test("make python-deps on a machine that has every module runs no apt-get", () => {
  // An apt-get first on PATH that only notes it was called (and fails, as it would for a non-root user).
  const dir = mkdtempSync(join(tmpdir(), "memd-apt-"));
  try {
    writeFileSync(join(dir, "apt-get"), `#!/bin/sh\necho "$@" >> ${dir}/called\nexit 1\n`, { mode: 0o755 });
    const r = Bun.spawnSync(["make", "--no-print-directory", "python-deps"], {
      cwd: repo,
      env: { ...process.env, PATH: `${dir}:${process.env.PATH}` },
      stdout: "pipe",
      stderr: "pipe",
    });
    const called = (() => {
      try {
        return readFileSync(join(dir, "called"), "utf8");
      } catch {
        return "";
      }
    })();
    expect({ called, code: r.exitCode }).toEqual({ called: "", code: 0 });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("with-pgbouncer names PgBouncer's reason when it cannot start (its port is taken)", async () => {
  const taken = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
  try {
    const p = Bun.spawn([join(repo, "scripts/with-pgbouncer"), "sh", "-c", 'echo "$MEMD_TEST_POOLER_URL"'], {
      cwd: repo,
      env: {
        ...process.env,
        MEMD_TEST_PGBOUNCER_PORT: String(taken.port),
        // PgBouncer connects to it only for a client: never here.
        MEMD_TEST_DATABASE_URL: "postgres://postgres@127.0.0.1:1/postgres",
      },
      stdout: "pipe",
      stderr: "pipe",
    });
    const [out, err, code] = await Promise.all([
      new Response(p.stdout).text(),
      new Response(p.stderr).text(),
      p.exited,
    ]);
    expect(code).toBe(0); // the command's own status
    expect(err).toContain("with-pgbouncer: pgbouncer did not start: WARNING cannot listen on 127.0.0.1:");
    expect(err).toContain("Address already in use");
    expect(err).toContain("FATAL nowhere to listen on");
    expect(out).toStartWith("unavailable: pgbouncer did not start: ");
    expect(out).toContain("Address already in use");
  } finally {
    taken.stop(true);
  }
});
