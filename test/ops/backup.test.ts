// @targets lmdb binary
// memd backup and backupStore: a consistent copy of a running server's store, on any data dir name.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { open } from "lmdb";
import { backupStore } from "../../src/storage/lmdb/backup";
import { rootSecret, runMemd, spawnServer, startTestServer, type TestServer, tempDir } from "../helpers";

const dirs: (() => void)[] = [];
afterAll(() => {
  for (const cleanup of dirs) cleanup();
});
const fresh = () => {
  const t = tempDir("memd-op-");
  dirs.push(t.cleanup);
  return t.dir;
};

/** Runs a memd command to its end (bounded), with a clean environment. */
const memd = (args: string[], env: Record<string, string> = {}) =>
  runMemd(args, { PATH: process.env.PATH, HOME: process.env.HOME, TMPDIR: process.env.TMPDIR, ...env });

const stop = async (p: { proc: Bun.Subprocess }) => {
  p.proc.kill("SIGTERM");
  return p.proc.exited;
};
let s: TestServer;
beforeAll(async () => (s = await startTestServer()));
afterAll(() => s.stop());

const store = (content: string) =>
  s.json("POST", "/v1/memory", { namespace: "ops", entity: "e", content, infer: false });

test("memd backup works on a data dir with a dot in its name and leaves no stray lock file", async () => {
  const base = fresh();
  const dir = join(base, "memd-data.v2");
  const a = await spawnServer(["--data-dir", dir], { MEMD_API_KEY: rootSecret });
  const r = await fetch(`${a.url}/v1/memory`, {
    method: "POST",
    headers: { authorization: `Bearer ${rootSecret}`, "content-type": "application/json" },
    body: JSON.stringify({ namespace: "b", entity: "e", content: "kept", infer: false }),
  });
  expect(r.status).toBe(200);
  const dest = join(base, "copy.v2");
  const backup = await memd(["backup", dest, "--data-dir", dir]);
  await stop(a);
  expect([backup.code, backup.err]).toEqual([0, ""]);
  expect(existsSync(`${dir}-lock`)).toBe(false);
  expect(existsSync(`${dest}-lock`)).toBe(false);
  const restored = await spawnServer(["--data-dir", dest], { MEMD_API_KEY: rootSecret });
  try {
    const list = await fetch(`${restored.url}/v1/memory?namespace=b`, {
      headers: { authorization: `Bearer ${rootSecret}` },
    });
    const { memories } = (await list.json()) as { memories: { content: string }[] };
    expect(memories.map((m) => m.content)).toEqual(["kept"]);
  } finally {
    await stop(restored);
  }
}, 30_000);

test("backupStore copies a consistent snapshot while the server runs", async () => {
  await store("backed up");
  const { dir, cleanup } = tempDir("memd-backup-");
  try {
    await backupStore(s.dataDir, `${dir}/copy`);
    const env = open({ path: `${dir}/copy`, maxDbs: 16 });
    const events = env.openDB("events", {});
    expect((events.getStats() as { entryCount: number }).entryCount).toBeGreaterThan(0);
    await env.close();
    await expect(backupStore(s.dataDir, `${dir}/copy`)).rejects.toThrow("already exists");
  } finally {
    cleanup();
  }
});
