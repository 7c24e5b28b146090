// In-process only (not in the binary pass of make test): it closes the server's store under it.
import { expect, test } from "bun:test";
import { startTestServer } from "./helpers";

test("/readyz answers 503 with an error body once the store is closed", async () => {
  const p = await startTestServer();
  try {
    await p.server.core.storage.close();
    const r = await p.json("GET", "/readyz", undefined, { key: null });
    expect(r.status).toBe(503);
    expect(r.body.error.code).toBe("not_ready");
    expect((await p.json("GET", "/healthz", undefined, { key: null })).status).toBe(200);
  } finally {
    await p.server.core.storage.close().catch(() => {});
    await p.server.stop().catch(() => {});
  }
});

test("bin/memd runs memd from the source checkout without Bun on PATH", () => {
  const root = `${import.meta.dir}/..`;
  const p = Bun.spawnSync([`${root}/bin/memd`, "--version"], { cwd: "/", env: { PATH: "/usr/bin:/bin" } });
  expect(p.exitCode).toBe(0);
  expect(p.stdout.toString()).toMatch(/^memd \d+\.\d+\.\d+ /);
});

test("every relative link in the README resolves inside the repository", () => {
  const root = `${import.meta.dir}/..`;
  const text = require("node:fs").readFileSync(`${root}/README.md`, "utf8") as string;
  const links = [...text.matchAll(/\]\(([^)\s]+)\)/g)].map((m) => m[1]).filter((l) => !/^[a-z]+:/i.test(l));
  expect(links.length).toBeGreaterThan(0);
  const { existsSync } = require("node:fs");
  const { resolve, relative } = require("node:path");
  for (const link of links) {
    const path = resolve(root, link.split("#")[0]);
    expect(relative(resolve(root), path).startsWith("..")).toBe(false);
    expect(existsSync(path)).toBe(true);
  }
});
