// @targets lmdb postgres binary
/** `memd keys ...` as users run it: a separate process on the data dir of a running server. */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { parseDuration } from "../../src/keys/cli";
import { runMemd, spawnServer, startTestServer, type TestServer, tempDir } from "../helpers";

const memd = (args: string[], env: Record<string, string> = {}) =>
  runMemd(args, { ...process.env, MEMD_DATA_DIR: "", MEMD_DATABASE_URL: s?.databaseUrl ?? "", ...env });

// No word boundary after the secret: base64url may end it with "-", which \b would cut off (a 1-in-64 flake).
const secretIn = (text: string) => /\b(memd_[\w-]+)/.exec(text)?.[1];

let s = undefined as unknown as TestServer;
describe("against a running in-process server", () => {
  beforeAll(async () => (s = await startTestServer()));
  afterAll(async () => {
    await s.stop();
    s = undefined as unknown as TestServer;
  });

  test("create prints the secret once with how to use it; the key works at once", async () => {
    const r = await memd([
      "keys",
      "create",
      "--name",
      "agent-7",
      "--permission",
      "read_write",
      "--namespace",
      "team-a/*",
      "--namespace",
      "own",
      "--expires-in",
      "30d",
      "--data-dir",
      s.dataDir,
    ]);
    expect(r.code).toBe(0);
    const secret = secretIn(r.out)!;
    expect(secret).toMatch(/^memd_/);
    expect(r.out).toContain(`Authorization: Bearer ${secret}`);
    expect(r.out).toContain("shown only this once");
    const stored = await s.json(
      "POST",
      "/v1/memory",
      { namespace: "team-a/x", entity: "u", content: "hi", infer: false },
      { key: secret },
    );
    expect(stored.status).toBe(200);
    expect((await s.json("GET", "/v1/memory?namespace=team-ab", undefined, { key: secret })).status).toBe(403);
    const keys = (await s.json("GET", "/v1/keys")).body;
    const k = keys.find((x: { name: string }) => x.name === "agent-7");
    expect(k).toMatchObject({ permission: "read_write", namespaces: ["team-a/*", "own"] });
    expect(Date.parse(k.expiresAt) - Date.now()).toBeGreaterThan(29 * 86_400_000);
  });

  test("list shows keys without secrets; revoke from another process counts within 1 s (the key cache)", async () => {
    const created = await memd([
      "keys",
      "create",
      "--name=to-revoke",
      "--permission=read",
      "--namespace=own",
      `--data-dir=${s.dataDir}`,
    ]);
    const secret = secretIn(created.out)!;
    expect((await s.json("GET", "/v1/memory?namespace=own", undefined, { key: secret })).status).toBe(200);

    const list = await memd(["keys", "list", "--data-dir", s.dataDir]);
    expect(list.code).toBe(0);
    const line = list.out.split("\n").find((l) => l.includes("to-revoke"))!;
    expect(line).toMatch(/^key_\w+\s+to-revoke\s+read\s+own/);
    expect(list.out).not.toContain("memd_");
    const id = line.split(/\s+/)[0];

    const revoked = await memd(["keys", "revoke", id, "--data-dir", s.dataDir]);
    expect(revoked.code).toBe(0);
    const revokedAt = Date.now();
    let after = await s.json("GET", "/v1/memory?namespace=own", undefined, { key: secret });
    while (after.status === 200 && Date.now() - revokedAt < 1500) {
      await Bun.sleep(50);
      after = await s.json("GET", "/v1/memory?namespace=own", undefined, { key: secret });
    }
    expect(after).toMatchObject({ status: 401, body: { error: { code: "unauthorized" } } });
    expect((await memd(["keys", "list", "--data-dir", s.dataDir])).out).not.toContain(id);
    const again = await memd(["keys", "revoke", id, "--data-dir", s.dataDir]);
    expect(again.code).toBe(1);
    expect(again.err).toContain("no live key");
  });

  test("MEMD_DATA_DIR is used when --data-dir is absent", async () => {
    const r = await memd(["keys", "list"], { MEMD_DATA_DIR: s.dataDir });
    expect(r.code).toBe(0);
    expect(r.out).toContain("agent-7");
  });
});

test("a key made by the CLI works on a server in another process (spawnServer)", async () => {
  const { dir, cleanup } = tempDir();
  const server = await spawnServer(["--data-dir", dir], { MEMD_API_KEY: "" });
  try {
    const r = await memd([
      "keys",
      "create",
      "--name",
      "ops",
      "--permission",
      "admin",
      "--namespace",
      "*",
      "--data-dir",
      dir,
    ]);
    expect(r.code).toBe(0);
    const res = await fetch(`${server.url}/v1/keys`, { headers: { authorization: `Bearer ${secretIn(r.out)}` } });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { name: string }[]).map((k) => k.name)).toContain("ops");
  } finally {
    server.proc.kill("SIGTERM");
    await server.proc.exited;
    cleanup();
  }
});

describe("usage errors exit 2 with a clear message", () => {
  test.each([
    [["keys"], "Usage:"],
    [["keys", "frob"], 'unknown keys command "frob"'],
    [
      ["keys", "create", "--name", "a", "--permission", "read", "--namespace", "x", "--bogus", "1"],
      "unknown flag --bogus",
    ],
    [["keys", "create", "--permission", "read", "--namespace", "x"], "--name is required"],
    [
      ["keys", "create", "--name", "a", "--permission", "god", "--namespace", "x"],
      "--permission: expected one of read, read_write, admin",
    ],
    [["keys", "create", "--name", "a", "--permission", "read"], "--namespace is required"],
    [["keys", "create", "--name", "a", "--permission", "read", "--namespace", "a*b"], "namespaces[0]"],
    [
      ["keys", "create", "--name", "a", "--permission", "read", "--namespace", "x", "--expires-in", "soon"],
      "--expires-in",
    ],
    [["keys", "create", "--name"], "--name needs a value"],
    [["keys", "revoke"], "exactly one key id"],
    [["keys", "list", "--data-dir", "/nonexistent/memd"], "no data dir at /nonexistent/memd"],
  ])("memd %p", async (args, message) => {
    const { dir, cleanup } = tempDir();
    const r = await memd(args, { MEMD_DATA_DIR: dir });
    cleanup();
    expect(r.code).toBe(2);
    expect(r.err).toContain(message);
  });

  test("memd keys --help prints usage on stdout, exit 0", async () => {
    const r = await memd(["keys", "--help"]);
    expect(r.code).toBe(0);
    expect(r.out).toContain("memd keys create --name N --permission P --namespace NS");
  });
});

test.each([
  ["30d", 30 * 86_400_000],
  ["12h", 12 * 3_600_000],
  ["90m", 90 * 60_000],
  ["45s", 45_000],
])("parseDuration(%p)", (raw, ms) => expect(parseDuration(raw)).toBe(ms));
test.each(["0d", "1w", "-1d", "1.5h", "", "d"])("parseDuration(%p) throws", (raw) =>
  expect(() => parseDuration(raw)).toThrow(),
);
