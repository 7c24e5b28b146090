// The client as another project gets it: the tarball `make build` packs (scripts/pack-client),
// installed with `bun install` into a scratch project outside this checkout, used from there:
// its exports and types, and its test kit, which runs the memd that MEMD_BIN names (else `memd`
// on PATH) and says so when there is neither.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { tempDir } from "../helpers";

const repo = join(import.meta.dir, "..", "..");
const tmp = tempDir("memd-client-install-");
const project = join(tmp.dir, "project");
const bun = process.execPath;
const memdBin = join(repo, "bin", "memd");

function run(cmd: string[], env: Record<string, string | undefined> = process.env, cwd = project) {
  const p = Bun.spawnSync(cmd, { cwd, env, stdout: "pipe", stderr: "pipe" });
  return { code: p.exitCode, out: p.stdout.toString(), err: p.stderr.toString() };
}

beforeAll(() => {
  const build = run([bun, "run", "client/build.ts"], process.env, repo);
  expect(build).toMatchObject({ code: 0 });
  const pack = run([join(repo, "scripts/pack-client"), join(tmp.dir, "pack")], process.env, repo);
  expect(pack).toMatchObject({ code: 0 });
  const tarball = pack.out.trim();
  expect(tarball).toEndWith("/memd-client-0.1.0.tgz");
  Bun.spawnSync(["mkdir", "-p", project]);
  writeFileSync(join(project, "package.json"), JSON.stringify({ name: "scratch", private: true, type: "module" }));
  // The package has no dependencies of its own: the install needs no registry.
  const install = run([bun, "add", tarball, "--no-progress"]);
  expect({ code: install.code, err: install.err }).toMatchObject({ code: 0 });
}, 120_000);
afterAll(() => tmp.cleanup());

test("the installed package holds dist, types and the licence, and names its licence", async () => {
  const dir = join(project, "node_modules", "@memd", "client");
  const pkg = await Bun.file(join(dir, "package.json")).json();
  expect(pkg.license).toBe("Apache-2.0");
  for (const f of ["dist/index.js", "dist/index.d.ts", "dist/testkit.js", "dist/testkit.d.ts", "LICENSE"])
    expect({ f, there: await Bun.file(join(dir, f)).exists() }).toEqual({ f, there: true });
  expect(await Bun.file(join(dir, "LICENSE")).text()).toContain("Apache License");
  // Node too resolves its exports (the client needs only fetch).
  const node = run(["node", "-e", 'import("@memd/client").then((m) => console.log(typeof m.createClient))']);
  expect(node).toMatchObject({ code: 0, out: "function\n" });
});

test("its types check in the project, and catch a wrong call", () => {
  writeFileSync(
    join(project, "tsconfig.json"),
    JSON.stringify({
      compilerOptions: {
        strict: true,
        noEmit: true,
        target: "ES2022",
        module: "ESNext",
        moduleResolution: "bundler",
        lib: ["ESNext", "DOM"],
        types: [],
      },
      include: ["typed.ts"],
    }),
  );
  const typed = (extra: string) =>
    writeFileSync(
      join(project, "typed.ts"),
      `import { createClient, MemdError, type Memory } from "@memd/client";
import type { Memd, StartOptions } from "@memd/client/testkit";
const client = createClient({ url: "http://127.0.0.1:1", key: "k" });
export async function first(): Promise<Memory | undefined> {
  const page = await client.list({ namespace: "app", entity: "u1", limit: 1 });
  return page.memories[0];
}
export const options: StartOptions = { bin: "/usr/local/bin/memd", args: ["--rate-limit", "5"] };
export type Server = Memd;
export const isError = (e: unknown) => e instanceof MemdError && e.status === 404;
${extra}
`,
    );
  const tsc = join(repo, "node_modules", ".bin", "tsc");
  typed("");
  expect(run([tsc, "-p", "tsconfig.json"])).toMatchObject({ code: 0 });
  typed('client.store({ namespace: "app", entity: "u1", contents: "typo" });');
  const wrong = run([tsc, "-p", "tsconfig.json"]);
  expect(wrong.code).not.toBe(0);
  expect(wrong.out).toContain("contents");
}, 60_000);

test("its test kit, in the project's own bun test, runs the memd of MEMD_BIN", () => {
  writeFileSync(
    join(project, "memory.test.ts"),
    `import { expect, test } from "bun:test";
import { MemdError } from "@memd/client";
import { startMemd } from "@memd/client/testkit";

test("remembers", async () => {
  const memd = await startMemd({ model: [{ operations: [{ fact: "User drinks tea", decision: "ADD", category: "preference" }] }] });
  try {
    const smart = await memd.client.store({ namespace: "app", entity: "u1", content: "I drink tea" });
    expect(smart.memories.map((m) => m.content)).toEqual(["User drinks tea"]);
    await memd.client.store({ namespace: "app", entity: "u1", content: "lives in Lyon", infer: false });
    const page = await memd.client.list({ namespace: "app", entity: "u1" });
    expect(page.memories.map((m) => m.content).sort()).toEqual(["User drinks tea", "lives in Lyon"]);
    const missing = await memd.client.get("00000000-0000-7000-8000-000000000000").catch((e) => e);
    expect(missing).toBeInstanceOf(MemdError);
    expect(missing.status).toBe(404);
  } finally {
    await memd.stop();
  }
}, 60_000);
`,
  );
  const r = run([bun, "test", "memory.test.ts"], { ...process.env, MEMD_BIN: memdBin });
  expect({ code: r.code, err: r.err }).toMatchObject({ code: 0, err: expect.stringContaining("1 pass") });
}, 90_000);

test("its test kit runs under Node: the project's own `node --test` (memd itself is MEMD_BIN)", () => {
  writeFileSync(
    join(project, "memory.node.test.mjs"),
    `import assert from "node:assert/strict";
import { test } from "node:test";
import { MemdError } from "@memd/client";
import { findMemd, startMemd } from "@memd/client/testkit";

test("remembers, under Node", async () => {
  assert.equal(typeof globalThis.Bun, "undefined");
  const memd = await startMemd({ model: [{ operations: [{ fact: "User drinks tea", decision: "ADD", category: "preference" }] }] });
  try {
    const smart = await memd.client.store({ namespace: "app", entity: "u1", content: "I drink tea" });
    assert.deepEqual(smart.memories.map((m) => m.content), ["User drinks tea"]);
    assert.equal(memd.modelRequests.length, 1);
    await memd.client.store({ namespace: "app", entity: "u1", content: "lives in Lyon", infer: false });
    const page = await memd.client.list({ namespace: "app", entity: "u1" });
    assert.deepEqual(page.memories.map((m) => m.content).sort(), ["User drinks tea", "lives in Lyon"]);
    const missing = await memd.client.get("00000000-0000-7000-8000-000000000000").catch((e) => e);
    assert.ok(missing instanceof MemdError);
    assert.equal(missing.status, 404);
    assert.match(memd.logs(), /memd started/);
  } finally {
    await memd.stop();
  }
});

test("finds memd on PATH, and says where it looked when there is none", async () => {
  const bin = process.env.MEMD_BIN;
  delete process.env.MEMD_BIN;
  const path = process.env.PATH;
  try {
    process.env.PATH = bin.slice(0, bin.lastIndexOf("/")) + ":" + path;
    assert.equal(findMemd(), bin);
    process.env.PATH = "/nowhere";
    await assert.rejects(startMemd(), /Set MEMD_BIN to a memd binary/);
  } finally {
    process.env.MEMD_BIN = bin;
    process.env.PATH = path;
  }
});
`,
  );
  const r = run(["/usr/bin/node", "--test", "memory.node.test.mjs"], { ...process.env, MEMD_BIN: memdBin });
  expect({ code: r.code, out: r.out, err: r.err }).toMatchObject({ code: 0, out: expect.stringContaining("# pass 2") });
  expect(r.out).toContain("# fail 0");
}, 90_000);

test("`bun add` of the client's directory (after make build) works the same", () => {
  const other = join(tmp.dir, "by-path");
  Bun.spawnSync(["mkdir", "-p", other]);
  writeFileSync(join(other, "package.json"), JSON.stringify({ name: "by-path", private: true, type: "module" }));
  expect(run([bun, "add", join(repo, "client"), "--no-progress"], process.env, other)).toMatchObject({ code: 0 });
  writeFileSync(
    join(other, "check.ts"),
    `import { createClient } from "@memd/client";
import { findMemd } from "@memd/client/testkit";
console.log(typeof createClient, findMemd() === process.env.MEMD_BIN);
`,
  );
  expect(run([bun, "run", "check.ts"], { ...process.env, MEMD_BIN: memdBin }, other)).toMatchObject({
    code: 0,
    out: "function true\n",
  });
});

test("with no MEMD_BIN and no memd on PATH, the test kit says where it looked", () => {
  writeFileSync(
    join(project, "missing.ts"),
    `import { startMemd } from "@memd/client/testkit";
try { await startMemd(); console.log("started"); } catch (e) { console.log((e as Error).message); }
`,
  );
  const { MEMD_BIN: _unset, ...env } = process.env;
  const r = run([bun, "run", "missing.ts"], { ...env, PATH: "/usr/bin:/bin" });
  expect(r.code).toBe(0);
  expect(r.out).toContain("Set MEMD_BIN to a memd binary");
  expect(r.out).toContain("or put memd on PATH");
  const wrong = run([bun, "run", "missing.ts"], { ...env, PATH: "/usr/bin:/bin", MEMD_BIN: "/nowhere/memd" });
  expect(wrong.out).toContain("MEMD_BIN is /nowhere/memd, and there is no file there");
});
