// @targets lmdb postgres pgbouncer binary
import { afterAll, expect, test } from "bun:test";
import { spawnServer, startTestServer, tempDir } from "../helpers";

const dirs: (() => void)[] = [];
afterAll(() => {
  for (const cleanup of dirs) cleanup();
});

test("a restart keeps every memory and event", async () => {
  const { dir, cleanup } = tempDir();
  dirs.push(cleanup);
  const a = await startTestServer({ dataDir: dir });
  for (let i = 0; i < 20; i++)
    await a.json("POST", "/v1/memory", {
      namespace: "r",
      entity: `e${i % 2}`,
      content: `fact ${i}`,
      infer: false,
      tags: ["t"],
    });
  const events = (await a.json("GET", "/v1/memory/events?namespace=r&limit=1000")).body;
  const diff = (await a.json("POST", "/v1/memory/diff", { namespace: "r" })).body;
  await a.stop();
  const b = await startTestServer({ dataDir: dir });
  expect((await b.json("GET", "/v1/memory/events?namespace=r&limit=1000")).body).toEqual(events);
  expect((await b.json("POST", "/v1/memory/diff", { namespace: "r" })).body).toEqual(diff);
  // New events continue the order after a restart.
  const next = await b.json("POST", "/v1/memory", {
    namespace: "r",
    entity: "e0",
    content: "after restart",
    infer: false,
  });
  expect(Date.parse(next.body.memories[0].createdAt)).toBeGreaterThan(Date.parse(events[0].createdAt));
  const newest = (await b.json("GET", "/v1/memory/events?namespace=r&limit=1")).body[0];
  expect(Number(newest.id)).toBeGreaterThan(Number(events[0].id));
  await b.stop();
});

test("first start prints a root key once on stderr; kill -9 right after a 2xx loses nothing; SIGTERM exits 0", async () => {
  const { dir, cleanup } = tempDir();
  dirs.push(cleanup);
  const first = await spawnServer(["--data-dir", dir], { MEMD_API_KEY: "" });
  await Bun.sleep(50);
  const key = /memd_[\w-]+/.exec(first.stderr())?.[0];
  expect(key).toBeDefined();
  expect(first.stderr()).toContain("Authorization: Bearer");
  expect(first.stdout()).not.toContain(key!);
  const headers = { authorization: `Bearer ${key}`, "content-type": "application/json" };
  const ids: string[] = [];
  await Promise.all(
    Array.from({ length: 40 }, async (_, i) => {
      const r = await fetch(`${first.url}/v1/memory`, {
        method: "POST",
        headers,
        body: JSON.stringify({ namespace: "k9", entity: "e", content: `durable ${i}`, infer: false }),
      });
      if (r.status === 200) ids.push(((await r.json()) as { memories: { id: string }[] }).memories[0].id);
    }),
  );
  expect(ids).toHaveLength(40);
  first.proc.kill("SIGKILL");
  await first.proc.exited;

  const second = await spawnServer(["--data-dir", dir], { MEMD_API_KEY: "" });
  expect(second.stderr()).not.toContain("memd_");
  for (const id of ids) expect((await fetch(`${second.url}/v1/memory/${id}`, { headers })).status).toBe(200);
  second.proc.kill("SIGTERM");
  expect(await second.proc.exited).toBe(0);
  // The shutdown line names the version, commit, data dir and address, as the start-up line does.
  const stopped = JSON.parse(
    second
      .stdout()
      .split("\n")
      .find((l) => l.includes('"msg":"memd stopped"'))!,
  );
  expect(stopped).toMatchObject({
    version: expect.any(String),
    commit: expect.any(String),
    dataDir: dir,
    address: second.url,
  });
}, 30_000);

test("memd --help names memd serve --help where it names serve", () => {
  const root = `${import.meta.dir}/../..`;
  const help = Bun.spawnSync([process.execPath, "run", "src/main.ts", "--help"], { cwd: root });
  expect(help.exitCode).toBe(0);
  const text = help.stdout.toString();
  const serve = text.slice(text.indexOf("memd [serve]"), text.indexOf("memd backup"));
  expect(serve).toContain("memd serve --help");
});

test("memd serve --help lists every setting; unknown flags exit 2", async () => {
  const root = `${import.meta.dir}/../..`;
  const help = Bun.spawnSync([process.execPath, "run", "src/main.ts", "serve", "--help"], { cwd: root });
  const text = help.stdout.toString();
  for (const name of [
    "--host",
    "MEMD_HOST",
    "--port",
    "MEMD_PORT",
    "--data-dir",
    "MEMD_DATA_DIR",
    "MEMD_API_KEY",
    "MEMD_LLM_BASE_URL",
  ])
    expect(text).toContain(name);
  const bad = Bun.spawnSync([process.execPath, "run", "src/main.ts", "serve", "--nope"], { cwd: root });
  expect(bad.exitCode).toBe(2);
  expect(bad.stderr.toString()).toContain("unknown flag --nope");
});
