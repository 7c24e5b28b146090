// make release's script: the release files for linux-x64 (the arm64 binary is built the same
// way by `make release`; not here, to stay fast and need no download), the client tarball,
// and a SHA256SUMS that `sha256sum -c` accepts, as the docs tell users to check a download.
import { afterAll, expect, test } from "bun:test";
import { readdirSync } from "node:fs";
import { join } from "node:path";
import pkg from "../../package.json";
import { tempDir } from "../helpers";

const repo = join(import.meta.dir, "..", "..");
const tmp = tempDir("memd-release-");
afterAll(() => tmp.cleanup());

test("scripts/release.ts writes the binary, the client package and their checksums", async () => {
  const p = Bun.spawnSync([process.execPath, "run", "scripts/release.ts", "--out", tmp.dir, "--targets", "x64"], {
    cwd: repo,
    stdout: "pipe",
    stderr: "pipe",
  });
  expect({ code: p.exitCode, err: p.stderr.toString() }).toMatchObject({ code: 0 });
  const v = pkg.version;
  const binary = `memd-${v}-linux-x64`;
  expect(readdirSync(tmp.dir).sort()).toEqual(["SHA256SUMS", binary, `memd-client-${v}.tgz`].sort());
  const sums = (await Bun.file(join(tmp.dir, "SHA256SUMS")).text()).trim().split("\n");
  expect(sums.map((l) => l.split("  ")[1]).sort()).toEqual([binary, `memd-client-${v}.tgz`].sort());
  for (const line of sums) expect(line).toMatch(/^[0-9a-f]{64} {2}\S+$/);
  // As a user checks a download: sha256sum -c, and it catches a changed file.
  const check = Bun.spawnSync(["sha256sum", "-c", "SHA256SUMS"], { cwd: tmp.dir, stdout: "pipe" });
  expect({ code: check.exitCode, out: check.stdout.toString() }).toEqual({
    code: 0,
    out: [binary, `memd-client-${v}.tgz`]
      .sort((a, b) => sums.findIndex((l) => l.endsWith(a)) - sums.findIndex((l) => l.endsWith(b)))
      .map((f) => `${f}: OK\n`)
      .join(""),
  });
  const version = Bun.spawnSync([join(tmp.dir, binary), "version"], { stdout: "pipe" });
  expect(version.stdout.toString()).toContain(v);
  await Bun.write(join(tmp.dir, `memd-client-${v}.tgz`), "tampered");
  const bad = Bun.spawnSync(["sha256sum", "-c", "SHA256SUMS"], { cwd: tmp.dir, stdout: "pipe", stderr: "pipe" });
  expect(bad.exitCode).not.toBe(0);
  expect(bad.stdout.toString()).toContain(`memd-client-${v}.tgz: FAILED`);
}, 120_000);
