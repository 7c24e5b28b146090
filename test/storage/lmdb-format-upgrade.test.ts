// Upgrades lose nothing: a data dir written by the previous release (format 1, test/fixtures/v1-data)
// opens in this one, is migrated at start, and answers exactly as that release did
// (test/fixtures/v1-expected.json); a data dir from a newer release is refused and left untouched.
import { afterAll, expect, test } from "bun:test";
import { cpSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { openEnv, openLmdb } from "../../src/storage/lmdb/index";
import { FORMAT_VERSION } from "../../src/storage/lmdb/layout";
import { spawnServer, tempDir } from "../helpers";

const fixture = join(import.meta.dir, "../fixtures");
const rootKey = "memd_fixture_root_key_000000000000";
const expected = JSON.parse(readFileSync(join(fixture, "v1-expected.json"), "utf8"));
const dirs: ReturnType<typeof tempDir>[] = [];
afterAll(() => {
  for (const d of dirs) d.cleanup();
});

/** A copy of the v1 data dir in a fresh temp dir. */
function copyOfV1(): string {
  const d = tempDir("memd-upgrade-");
  dirs.push(d);
  const dataDir = join(d.dir, "data");
  cpSync(join(fixture, "v1-data"), dataDir, { recursive: true });
  return dataDir;
}

function formatOf(dataDir: string): unknown {
  const { env, dbs } = openEnv(dataDir);
  try {
    return dbs.meta.get("format");
  } finally {
    env.close();
  }
}

test("a v1 data dir is migrated at start and reads and diffs as the v1 release answered", async () => {
  const dataDir = copyOfV1();
  const server = await spawnServer(["--data-dir", dataDir], { MEMD_API_KEY: rootKey });
  const get = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(server.url + path, {
      method,
      headers: { authorization: `Bearer ${rootKey}`, "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    expect(res.status).toBe(200);
    return res.json() as Promise<any>;
  };
  // Since format 7 answers carry observed times: an older event has none (null), and an older
  // memory was observed when it was created (docs/time.md). Everything else is as v1 answered.
  const observedEvents = (events: any[]) => events.map((e) => ({ ...e, observedAt: null, oldObservedAt: null }));
  const observedMemories = (memories: any[]) => memories.map((m) => ({ ...m, observedAt: m.createdAt }));
  try {
    expect(await get("GET", "/v1/memory/events?namespace=acme")).toEqual(observedEvents(expected.events));
    expect(await get("GET", "/v1/memory/events?namespace=other")).toEqual(observedEvents(expected.eventsOther));
    expect(await get("POST", "/v1/memory/diff", { namespace: "acme" })).toEqual(expected.diff);
    expect(await get("POST", "/v1/memory/diff", { namespace: "other" })).toEqual(expected.diffOther);
    // The v1 release listed a namespace entity by entity, as a bare array; today a namespace lists
    // newest first across entities, a page at a time, as docs/api.md says. The same memories,
    // field for field, compared in creation (id) order.
    const byId = (a: { id: string }, b: { id: string }) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
    const page = await get("GET", "/v1/memory?namespace=acme");
    expect(page.nextCursor).toBeNull();
    expect([...page.memories].sort(byId)).toEqual(observedMemories([...expected.list].sort(byId)));
    // Keys: everything as it was, except lastUsedAt, which only moves forward with use.
    const keys = await get("GET", "/v1/keys");
    const withoutUse = (k: { lastUsedAt: string | null }) => ({ ...k, lastUsedAt: undefined });
    expect(keys.map(withoutUse)).toEqual(expected.keys.map(withoutUse));
    for (const [i, k] of keys.entries()) {
      const before = expected.keys[i].lastUsedAt;
      if (before !== null) expect(Date.parse(k.lastUsedAt)).toBeGreaterThanOrEqual(Date.parse(before));
    }
  } finally {
    server.proc.kill("SIGTERM");
    expect(await server.proc.exited).toBe(0);
  }
  expect(formatOf(dataDir)).toBe(FORMAT_VERSION);
}, 30_000);

test("a data dir from a newer release is refused with a clear message and exit 1, and left as it was", async () => {
  const dataDir = copyOfV1();
  {
    const { env, dbs } = openEnv(dataDir);
    await dbs.meta.put("format", FORMAT_VERSION + 1);
    await env.close();
  }
  const before = readFileSync(join(dataDir, "data.mdb"));
  const proc = Bun.spawn([process.execPath, "run", "src/main.ts", "serve", "--port", "0", "--data-dir", dataDir], {
    cwd: join(import.meta.dir, "../.."),
    env: { ...process.env, MEMD_API_KEY: rootKey },
    stdout: "pipe",
    stderr: "pipe",
  });
  expect(await proc.exited).toBe(1);
  const stderr = await new Response(proc.stderr).text();
  expect(stderr).toContain(
    `was written by a newer memd (format ${FORMAT_VERSION + 1}; this release reads up to ${FORMAT_VERSION}); upgrade memd`,
  );
  expect(Buffer.compare(readFileSync(join(dataDir, "data.mdb")), before)).toBe(0);
  expect(formatOf(dataDir)).toBe(FORMAT_VERSION + 1);
}, 30_000);

test("format 6: new records name their fields once, in the shared structures; records written before read as they were", async () => {
  const dataDir = copyOfV1();
  const storage = await openLmdb(dataDir);
  const before = await storage.currentMemories({ namespace: "acme" }, 100);
  const oldEvents = await storage.newestEvents({ namespace: "acme" }, 100);
  expect(before.length).toBeGreaterThan(0);
  const [added] = await storage.apply(
    [
      {
        event: "ADD",
        create: {
          id: Bun.randomUUIDv7(),
          namespace: "acme",
          entity: "new",
          content: "written by format 6",
          category: "general",
          importance: 0.5,
        },
      },
    ],
    null,
  );
  // A value that defines its own record starts with msgpackr's record definition (0xd4 0x72);
  // one that uses a shared structure starts with the structure's id (0x40 to 0x7f).
  const first = (bytes: Uint8Array | undefined) => bytes![0];
  expect(first(storage.dbs.memories.getBinary(added!.memory.id))).toBeWithin(0x40, 0x80);
  expect(first(storage.dbs.events.getBinary(added!.event.seq))).toBeWithin(0x40, 0x80);
  expect(first(storage.dbs.memories.getBinary(before[0].id))).toBe(0xd4);
  // A memory with every optional field shares its record shape too; the keys of its metadata
  // (anyone's words) stay in its own value, so erasing it leaves none in the shared structures.
  const [full] = await storage.apply(
    [
      {
        event: "ADD",
        create: {
          id: Bun.randomUUIDv7(),
          namespace: "acme",
          entity: "new",
          content: "with everything",
          category: "general",
          importance: 0.5,
          tags: ["t"],
          metadata: { "private-field-name": { nested: 1 } },
          source: "s",
          ttlSeconds: 3600,
        },
      },
    ],
    null,
  );
  expect(first(storage.dbs.memories.getBinary(full!.memory.id))).toBeWithin(0x40, 0x80);
  const shared = JSON.stringify(storage.dbs.memories.get(Symbol.for("structures") as never));
  expect(shared).toContain("expiresAt");
  expect(shared).not.toContain("private-field-name");
  expect(shared).not.toContain("nested");
  expect((await storage.getMemory(full!.memory.id))?.metadata).toEqual({ "private-field-name": { nested: 1 } });
  await storage.close();
  const again = await openLmdb(dataDir);
  try {
    expect(again.dbs.meta.get("format")).toBe(FORMAT_VERSION);
    const after = await again.currentMemories({ namespace: "acme" }, 100);
    expect(after.find((m) => m.id === added!.memory.id)).toEqual(added!.memory);
    expect(after.filter((m) => m.id !== added!.memory.id && m.id !== full!.memory.id)).toEqual(before);
    expect((await again.newestEvents({ namespace: "acme" }, 100)).slice(2)).toEqual(oldEvents);
  } finally {
    await again.close();
  }
});
