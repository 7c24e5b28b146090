// @targets lmdb postgres pgbouncer binary
// memd export / memd import and GET /v1/export. The store under test (either backend) is the
// source; the target is a fresh store of the other backend, so the LMDB run checks
// LMDB -> export -> PostgreSQL and the PostgreSQL run the way back.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import {
  backend,
  dumpStorage,
  freshDatabase,
  rootSecret,
  runMemd,
  type ServerProcess,
  spawnServer,
  startTestServer,
  type TestServer,
  tempDir,
} from "../helpers";

const tmp = tempDir("memd-transfer-");
let s: TestServer;
let writeKey: string;
let nsAdmin: string;

/** Where a store lives, as flags of memd commands. */
type Place = { flags: string[] };
let source: Place;

/** `run` over `items`, at most four at once, the answers in the items' order. */
async function inBatches<T, R>(items: readonly T[], run: (item: T) => Promise<R>): Promise<R[]> {
  const out: R[] = [];
  for (let i = 0; i < items.length; i += 4) out.push(...(await Promise.all(items.slice(i, i + 4).map(run))));
  return out;
}

const memd = (args: string[]) => runMemd(args, { ...process.env, MEMD_DATA_DIR: "", MEMD_DATABASE_URL: "" });

/** A fresh empty store of the other backend. */
async function otherStore(name: string): Promise<Place> {
  if (backend === "lmdb") return { flags: ["--database-url", await freshDatabase()] };
  return { flags: ["--data-dir", join(tmp.dir, name)] };
}

const records = (text: string) =>
  text
    .trim()
    .split("\n")
    .filter((l) => !l.includes('"type":"header"'));

beforeAll(async () => {
  s = await startTestServer();
  source = { flags: s.databaseUrl ? ["--database-url", s.databaseUrl] : ["--data-dir", s.dataDir] };
  const key = async (permission: string, namespaces: string[]) =>
    (await s.json("POST", "/v1/keys", { name: permission, permission, namespaces })).body.secret as string;
  writeKey = await key("read_write", ["*"]);
  nsAdmin = await key("admin", ["team"]);
  // A history with every kind of change: adds with tags, metadata, source and TTL, a duplicate
  // skip, an edit, deletes, an entity delete and an erasure, in two namespaces.
  const add = (namespace: string, entity: string, content: string, extra: Record<string, unknown> = {}) =>
    s.json("POST", "/v1/memory", { namespace, entity, content, infer: false, ...extra });
  for (let i = 0; i < 12; i++)
    await add(i % 3 ? "team" : "solo", `u${i % 4}`, `fact number ${i}`, {
      tags: [`t${i % 2}`],
      metadata: { i, nested: { b: 1, a: [1, "x"] } },
      source: "chat",
      ...(i === 5 ? { ttl: 86400 } : {}),
    });
  await s.json("POST", "/v1/memory", { namespace: "team", entity: "u1", content: "fact number 1" });
  const list = (await s.json("GET", "/v1/memory?namespace=team&limit=100")).body.memories;
  await s.json("PATCH", `/v1/memory/${list[0].id}`, { content: "edited fact", importance: 0.25 });
  await s.json("DELETE", `/v1/memory/${list[1].id}`);
  await s.json("DELETE", "/v1/memory?namespace=team&entity=u2");
  await s.json("POST", "/v1/memory/erase", { namespace: "solo", entity: "u0" });
  await s.json("GET", "/v1/memory?namespace=team", undefined, { key: writeKey });
  await s.json("GET", "/v1/memory?namespace=team", undefined, { key: nsAdmin });
  await Bun.sleep(50);
});
afterAll(async () => {
  await s.stop();
  tmp.cleanup();
});

describe("memd export", () => {
  test("a header, then every memory (all states), event and erasure; keys only with --keys, never secrets", async () => {
    const out = join(tmp.dir, "all.jsonl");
    const r = await memd(["export", ...source.flags, "--out", out]);
    expect({ code: r.code, out: r.out }).toEqual({ code: 0, out: "" });
    expect(r.err).toMatch(/^export: \d+\/\d+ records, [\d,]+\/s, [\d.]+ s\n$/);
    const lines = readFileSync(out, "utf8")
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    expect(lines[0]).toMatchObject({ type: "header", format: 2, namespaces: null, keys: false });
    expect(Date.parse(lines[0].exportedAt)).toBeGreaterThan(0);
    const types = lines.slice(1).map((l) => l.type);
    expect(new Set(types)).toEqual(new Set(["memory", "event", "erasure"]));
    expect(lines.filter((l) => l.type === "memory").map((l) => l.state)).toContain("deleted");
    expect(lines.filter((l) => l.type === "event").map((l) => l.event)).toEqual(
      expect.arrayContaining(["ADD", "UPDATE", "DELETE", "SKIP_DUPLICATE"]),
    );

    const withKeys = await memd(["export", ...source.flags, "--keys", "--namespace", "team"]);
    expect(withKeys.code).toBe(0);
    const kl = withKeys.out
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    expect(kl[0]).toMatchObject({ namespaces: ["team"], keys: true });
    expect(kl.filter((l) => l.type === "key").map((k) => k.hash)).toHaveLength(2);
    expect(withKeys.out).not.toContain(writeKey);
    expect(kl.filter((l) => l.namespace !== undefined).every((l) => l.namespace === "team")).toBe(true);
  }, 60_000);

  test("usage errors: 2, with the reason", async () => {
    const cases: [string[], RegExp][] = [
      [["export", "--bogus"], /unknown flag --bogus/],
      [["export", "--out"], /--out needs a value/],
      [["export", "extra"], /unexpected argument extra/],
      [["export", "--data-dir", join(tmp.dir, "none")], /no data dir/],
      [["import"], /import needs one FILE/],
      [["import", join(tmp.dir, "missing.jsonl"), ...source.flags], /no file at/],
      [["compact", "--what"], /unknown flag --what/],
    ];
    // Each a process of its own, a few at a time (each spends most of its life starting Bun).
    const answers = await inBatches(cases, ([args]) => memd(args));
    for (const [i, [args, message]] of cases.entries()) {
      expect({ args, code: answers[i].code }).toEqual({ args, code: 2 });
      expect(answers[i].err).toMatch(message);
    }
    const out = join(tmp.dir, "exists.jsonl");
    writeFileSync(out, "x");
    expect((await memd(["export", ...source.flags, "--out", out])).code).toBe(2);
  }, 60_000);
});

describe("GET /v1/export", () => {
  test("streams the same records as memd export", async () => {
    const cli = await memd(["export", ...source.flags]);
    const res = await s.api("GET", "/v1/export");
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("application/x-ndjson");
    const text = await res.text();
    expect(JSON.parse(text.split("\n")[0])).toMatchObject({ type: "header", keys: false });
    expect(records(text)).toEqual(records(cli.out));
    const team = await s.api("GET", "/v1/export?namespace=team", undefined, { key: nsAdmin });
    expect(team.status).toBe(200);
    expect(records(await team.text())).toEqual(
      records((await memd(["export", ...source.flags, "--namespace", "team"])).out),
    );
    // `namespace` repeats for several (and only here: elsewhere a repeated parameter is a 400).
    const both = await s.api("GET", "/v1/export?namespace=team&namespace=solo");
    expect(both.status).toBe(200);
    const bothRecords = records(await both.text());
    expect(bothRecords).toEqual(
      records((await memd(["export", ...source.flags, "--namespace", "team", "--namespace", "solo"])).out),
    );
    expect(new Set(bothRecords.map((l) => JSON.parse(l).namespace))).toEqual(new Set(["team", "solo"]));
    expect((await s.json("GET", "/v1/memory?namespace=team&namespace=solo")).status).toBe(400);
  }, 60_000);

  test("400, 403 and nothing changes", async () => {
    const before = await dumpStorage(s.server.core.storage);
    const cases: [string, string, number, string?][] = [
      ["control character", "/v1/export?namespace=%01", 400],
      ["unknown parameter", "/v1/export?keys=true", 400],
      ["read_write key", "/v1/export?namespace=team", 403, writeKey],
      ["admin of team, all namespaces", "/v1/export", 403, nsAdmin],
      ["admin of team, another namespace", "/v1/export?namespace=solo", 403, nsAdmin],
    ];
    for (const [name, path, status, key] of cases) {
      const r = await s.json("GET", path, undefined, key ? { key } : undefined);
      expect({ name, status: r.status }).toEqual({ name, status });
    }
    expect(await dumpStorage(s.server.core.storage)).toBe(before);
  }, 60_000);
});

describe("memd import", () => {
  let file: string;
  beforeAll(async () => {
    file = join(tmp.dir, "source.jsonl");
    expect((await memd(["export", ...source.flags, "--keys", "--out", file])).code).toBe(0);
  }, 60_000);

  test("a bad line anywhere: refused with its number and reason, nothing written", async () => {
    const target = await otherStore("bad-target");
    const good = readFileSync(file, "utf8").trim().split("\n");
    const header = good[0];
    const bad = (i: number, line: string) => [...good.slice(0, i), line, ...good.slice(i + 1)].join("\n");
    const last = good.length - 1;
    const memory = JSON.parse(good.find((l) => l.includes('"type":"memory"'))!);
    const cases: [string, string, RegExp][] = [
      ["not JSON", bad(last, "{oops"), new RegExp(`line ${last + 1}: not valid JSON`)],
      ["unknown type", bad(2, '{"type":"thing"}'), /line 3: unknown record type "thing"/],
      ["bad field", bad(2, JSON.stringify({ ...memory, importance: 7 })), /line 3: memory: \/importance/],
      ["extra field", bad(2, JSON.stringify({ ...memory, secret: "x" })), /line 3: memory: /],
      ["no header", good.slice(1).join("\n"), /line 1: expected a header line/],
      ["newer format", bad(0, header.replace('"format":2', '"format":9')), /line 1: export format 9/],
      ["second header", bad(4, header), /line 5: a second header line/],
      ["empty file", "", /line 1: the file is empty/],
      // One id twice, far apart (a later batch than its first line): refused before any write.
      [
        "id twice",
        `${good.join("\n")}\n${JSON.stringify({ ...memory, content: "again" })}`,
        /appears twice \(first on line \d+\)/,
      ],
    ];
    // One at a time: imports into the same store at once (the LMDB one, on PostgreSQL's targets)
    // failed once with LMDB's "No transaction to renew" instead of the refusal.
    const answers: Awaited<ReturnType<typeof memd>>[] = [];
    for (const [name, text] of cases) {
      const path = join(tmp.dir, `bad-${name.replaceAll(" ", "-")}.jsonl`);
      writeFileSync(path, text);
      answers.push(await memd(["import", path, ...target.flags]));
    }
    for (const [i, [name, , message]] of cases.entries()) {
      const r = answers[i];
      expect({ name, code: r.code }).toEqual({ name, code: 1 });
      expect(r.err).toMatch(/refused, nothing written/);
      expect(r.err).toMatch(message);
    }
    // Nothing was written: an export of the target has no record.
    expect(records((await memd(["export", ...target.flags, "--keys"])).out)).toEqual([]);
  }, 60_000);

  test("round trip to the other backend: the same records, diff and events; an interrupted import completes", async () => {
    const target = await otherStore("round-trip");
    // An import that stopped half way: the first half of the file.
    const lines = readFileSync(file, "utf8").trim().split("\n");
    const half = join(tmp.dir, "half.jsonl");
    writeFileSync(half, `${lines.slice(0, Math.ceil(lines.length / 2)).join("\n")}\n`);
    expect((await memd(["import", half, ...target.flags])).code).toBe(0);
    // The same command on the whole file completes it.
    const full = await memd(["import", file, ...target.flags]);
    expect({ code: full.code, err: full.err }).toMatchObject({ code: 0, err: expect.stringContaining("imported") });
    expect(full.err).toMatch(/import: writing: .*records/);
    // Run again: every id exists now, so it is refused (nothing written); --skip-existing leaves them.
    const again = await memd(["import", file, ...target.flags]);
    expect(again.code).toBe(1);
    expect(again.err).toMatch(/refused, nothing written: line 2: .* already exists, as does every record of the file/);
    const skipping = await memd(["import", file, "--skip-existing", ...target.flags]);
    expect(skipping).toMatchObject({ code: 0, err: expect.stringContaining("imported 0 records") });

    const back = await memd(["export", ...target.flags, "--keys"]);
    expect(records(back.out)).toEqual(records(readFileSync(file, "utf8")));

    // Diff and events answers are the same on a server over the imported store.
    const t: ServerProcess = await spawnServer(target.flags, { MEMD_API_KEY: rootSecret, MEMD_LOG_LEVEL: "info" });
    try {
      const get = async (url: string, method: string, path: string, body?: unknown) => {
        const res = await fetch(url + path, {
          method,
          headers: { authorization: `Bearer ${rootSecret}`, "content-type": "application/json" },
          body: body === undefined ? undefined : JSON.stringify(body),
        });
        return { status: res.status, body: (await res.json()) as any };
      };
      for (const ns of ["team", "solo"]) {
        for (const [method, path, body] of [
          ["GET", `/v1/memory/events?namespace=${ns}&limit=1000`],
          ["GET", `/v1/memory/events?namespace=${ns}&entity=u1&limit=1000`],
          ["POST", "/v1/memory/diff", { namespace: ns }],
          ["POST", "/v1/memory/diff", { namespace: ns, since: "2000-01-01T00:00:00Z", limit: 5 }],
          ["GET", `/v1/memory?namespace=${ns}&limit=1000`],
          ["GET", `/v1/memory/erasures?namespace=${ns}`],
        ] as [string, string, unknown?][]) {
          const a = await get(s.url, method, path, body);
          const b = await get(t.url, method, path, body);
          expect({ path, ...b }).toEqual({ path, ...a });
        }
      }
      // New events on the target continue after the imported ones (seq and time).
      const lastEvent = (await get(t.url, "GET", "/v1/memory/events?namespace=team&limit=1")).body[0];
      await get(t.url, "POST", "/v1/memory", {
        namespace: "team",
        entity: "u9",
        content: "after import",
        infer: false,
      });
      const newest = (await get(t.url, "GET", "/v1/memory/events?namespace=team&limit=1")).body[0];
      expect(Number(newest.id)).toBeGreaterThan(Number(lastEvent.id));
      expect(Date.parse(newest.createdAt)).toBeGreaterThan(Date.parse(lastEvent.createdAt));
      // The imported keys work on the target.
      const keyed = await fetch(`${t.url}/v1/memory?namespace=team`, {
        headers: { authorization: `Bearer ${writeKey}` },
      });
      expect(keyed.status).toBe(200);
    } finally {
      t.proc.kill("SIGTERM");
      await t.proc.exited;
    }
  }, 60_000);

  test("existing ids are refused with their line; --skip-existing leaves them and imports the rest", async () => {
    const target = await otherStore("existing");
    const lines = readFileSync(file, "utf8").trim().split("\n");
    const memIdx = lines.findIndex((l) => l.includes('"type":"memory"'));
    const changed = JSON.parse(lines[memIdx]);
    // The target already holds the first memory, with other contents.
    const pre = join(tmp.dir, "pre.jsonl");
    writeFileSync(pre, `${lines[0]}\n${JSON.stringify({ ...changed, content: "different" })}\n`);
    expect((await memd(["import", pre, ...target.flags])).code).toBe(0);
    const refused = await memd(["import", file, ...target.flags]);
    expect(refused.code).toBe(1);
    expect(refused.err).toContain(`line ${memIdx + 1}: memory ${changed.id} already exists with other contents`);
    expect(records((await memd(["export", ...target.flags])).out)).toHaveLength(1);
    const skipped = await memd(["import", file, "--skip-existing", ...target.flags]);
    expect(skipped.code).toBe(0);
    expect(skipped.err).toContain("1 already there, left as they were");
    const after = records((await memd(["export", ...target.flags, "--keys"])).out);
    expect(after).toHaveLength(lines.length - 1);
    expect(after.join("\n")).toContain('"content":"different"');
  }, 60_000);
});
