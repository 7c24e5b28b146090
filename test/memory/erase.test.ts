// @targets lmdb postgres pgbouncer binary
// POST /v1/memory/erase: forgetting a person, and the proof that nothing of them remains after
// `memd compact`. Runs on both backends.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { SQL } from "bun";
import { packing } from "../../src/index/keyword";
import { snapshotDir } from "../../src/storage/lmdb/keyword-snapshot";
import { backend, dumpStorage, runMemd, startTestServer, type TestServer, tempDir } from "../helpers";

const marker = `ZQXMARK${crypto.randomUUID().replaceAll("-", "").slice(0, 12)}`;
const tmp = tempDir();
let s: TestServer;
let writeKey: string;
let scopedAdmin: string;

const memd = (args: string[], env: Record<string, string> = {}) =>
  runMemd(args, { ...process.env, MEMD_DATA_DIR: "", MEMD_DATABASE_URL: s.databaseUrl ?? "", ...env });

beforeAll(async () => {
  // On PostgreSQL, every namespace searched gets its keyword lists and vectors written to the
  // database (search_snapshots, search_snapshot_parts), so that the erasure must delete them.
  s = await startTestServer({ dataDir: tmp.dir, args: backend === "lmdb" ? [] : ["--pg-snapshot-from", "1"] });
  const key = async (permission: string, namespaces: string[]) =>
    (await s.json("POST", "/v1/keys", { name: permission, permission, namespaces })).body.secret as string;
  writeKey = await key("read_write", ["*"]);
  scopedAdmin = await key("admin", ["elsewhere"]);
  for (const k of [writeKey, scopedAdmin]) await s.json("GET", "/v1/memory?namespace=elsewhere", undefined, { key: k });
  // More memories than a small namespace keeps packed (packing.upTo, src/index/keyword/space.ts): only
  // then are its keyword lists saved in a snapshot file, which the erasure must delete.
  for (let i = 0; i <= packing.upTo; i++) await store("filler", `Filler note number ${i}`);
  await Bun.sleep(50);
});
afterAll(async () => {
  await s.stop();
  tmp.cleanup();
});

/** The keyword snapshots in the data dir (LMDB). */
const snapshots = () => (existsSync(snapshotDir(tmp.dir)) ? readdirSync(snapshotDir(tmp.dir)) : []);
/** Until the snapshot written behind the first search is in place (it is written a piece at a time). */
const waitForSnapshot = async () => {
  const written = () => snapshots().length === 1 && snapshots()[0].endsWith(".bin");
  for (let i = 0; i < 3000 && !written(); i++) await Bun.sleep(10);
  expect(snapshots()).toEqual([expect.stringMatching(/\.bin$/)]);
};
/**
 * PostgreSQL: the search snapshots of namespace gdpr in the database, and how many of their rows
 * hold the marker (as written, or folded to lower case as the keyword lists keep words): the
 * header of search_snapshots (text) or the bytes of a part.
 */
const pgSnapshots = async () => {
  const sql = new SQL(s.databaseUrl!);
  const needles = [marker, marker.toLowerCase()];
  try {
    const [row] = await sql.unsafe(
      `SELECT (SELECT count(*) FROM search_snapshots WHERE namespace = 'gdpr') AS n,
              (SELECT count(*) FROM search_snapshots WHERE namespace = 'gdpr' AND kind = 'keyword') AS keyword,
              (SELECT count(*) FROM search_snapshots t WHERE ${needles.map((m) => `t::text LIKE '%${m}%'`).join(" OR ")})
            + (SELECT count(*) FROM search_snapshot_parts t
                WHERE ${needles.map((m) => `position(convert_to('${m}', 'UTF8') in t.data) > 0`).join(" OR ")}) AS held`,
    );
    return { n: Number(row.n), keyword: Number(row.keyword), held: Number(row.held) };
  } finally {
    await sql.close();
  }
};
/** Until `done` holds of pgSnapshots() (written in the background after a namespace's lists are built). */
const untilPgSnapshots = async (done: (x: Awaited<ReturnType<typeof pgSnapshots>>) => boolean) => {
  let x = await pgSnapshots();
  for (let i = 0; i < 300 && !done(x); i++) {
    await Bun.sleep(50);
    x = await pgSnapshots();
  }
  return x;
};
const store = async (entity: string, content: string, extra: Record<string, unknown> = {}) =>
  (await s.json("POST", "/v1/memory", { namespace: "gdpr", entity, content, infer: false, ...extra })).body.memories[0];

describe("erase", () => {
  let erasedIds: string[] = [];
  let since: string;

  test("every memory and event of the entity loses its content; a diff client sees them deleted, content null", async () => {
    const a = await store("alice", `Alice's phone is ${marker}-1`, {
      tags: [`${marker}-tag`],
      metadata: { note: `${marker}-meta`, [`${marker}-key`]: "a field name is personal data too" },
      source: `${marker}-src`,
    });
    const b = await store("alice", `Alice lives at ${marker}-2`);
    const c = await store("alice", `Alice once said ${marker}-3`);
    const bob = await store("bob", "Bob likes chess");
    since = new Date().toISOString();
    await Bun.sleep(5);
    // An edit, a delete, and an idempotent store whose kept answer holds the content.
    expect((await s.json("PATCH", `/v1/memory/${b.id}`, { content: `Alice moved to ${marker}-4` })).status).toBe(200);
    expect((await s.json("DELETE", `/v1/memory/${c.id}`)).status).toBe(200);
    const kept = await s.api(
      "POST",
      "/v1/memory",
      { namespace: "gdpr", entity: "alice", content: `Remember ${marker}-5`, infer: false },
      { headers: { "content-type": "application/json", "idempotency-key": "alice-1" } },
    );
    const d = ((await kept.json()) as any).memories[0];
    erasedIds = [a.id, b.id, c.id, d.id];
    // A keyword search finds the marker: on LMDB the namespace's lists are then saved in a
    // snapshot beside the store (src/storage/lmdb/keyword-snapshot.ts), which the erasure deletes.
    const found = await s.json("POST", "/v1/memory/search", { namespace: "gdpr", query: marker, mode: "keyword" });
    expect(found.body.results.length).toBe(3);
    if (backend === "lmdb") {
      await waitForSnapshot();
      // It holds the marker as the lists keep words (folded): what the scans below look for.
      const file = readFileSync(join(snapshotDir(tmp.dir), snapshots()[0]));
      expect(file.includes(Buffer.from(marker.toLowerCase()))).toBe(true);
    }
    // On PostgreSQL the namespace's keyword lists, written to the database, hold the marker.
    else expect((await untilPgSnapshots((x) => x.held > 0)).held).toBeGreaterThan(0);

    const r = await s.json("POST", "/v1/memory/erase", { namespace: "gdpr", entity: "alice" });
    expect(r.status).toBe(200);
    if (backend === "lmdb") expect(snapshots()).toEqual([]);
    // Deleted in the erasure's transaction.
    else expect(await pgSnapshots()).toEqual({ n: 0, keyword: 0, held: 0 });
    expect(
      (await s.json("POST", "/v1/memory/search", { namespace: "gdpr", query: marker, mode: "keyword" })).body.results,
    ).toEqual([]);
    // That search built the lists again and they are written again: without the marker.
    if (backend !== "lmdb") expect(await untilPgSnapshots((x) => x.keyword > 0)).toMatchObject({ keyword: 1, held: 0 });
    expect(r.body).toMatchObject({ namespace: "gdpr", entity: "alice", actorKeyId: "root", memories: 4 });
    // 4 ADD + 1 UPDATE + 1 DELETE before, then 3 DELETE (erased) for the memories still current.
    expect(r.body.events).toBe(9);

    const events = (await s.json("GET", "/v1/memory/events?namespace=gdpr&entity=alice&limit=1000")).body;
    expect(events).toHaveLength(9);
    for (const e of events) expect(e).toMatchObject({ oldContent: null, newContent: null, reason: "erased" });
    expect(events.map((e: any) => e.event).sort()).toEqual(
      ["ADD", "ADD", "ADD", "ADD", "UPDATE", "DELETE", "DELETE", "DELETE", "DELETE"].sort(),
    );
    for (const id of erasedIds) expect((await s.json("GET", `/v1/memory/${id}`)).status).toBe(404);
    const left = (await s.json("GET", "/v1/memory?namespace=gdpr&limit=1000")).body.memories;
    expect(left.filter((m: any) => m.entity !== "filler").map((m: any) => m.id)).toEqual([bob.id]);

    // A client that saw a, b and c follows the diff: all three gone, no content; d was born and
    // erased inside its window, so it never shows.
    const diff = (await s.json("POST", "/v1/memory/diff", { namespace: "gdpr", entity: "alice", since })).body;
    expect(diff.created).toEqual([]);
    expect(diff.updated).toEqual([]);
    expect(diff.deleted.map((x: any) => x.id).sort()).toEqual([a.id, b.id, c.id].sort());
    for (const x of diff.deleted) expect(x).toMatchObject({ content: null, reason: "erased" });
    const fromStart = (await s.json("POST", "/v1/memory/diff", { namespace: "gdpr", entity: "alice" })).body;
    expect(fromStart.changeCount).toBe(0);

    // The kept answer is gone too: the retry runs again (and stores again).
    const retry = await s.api(
      "POST",
      "/v1/memory",
      { namespace: "gdpr", entity: "alice", content: `Remember ${marker}-5`, infer: false },
      { headers: { "content-type": "application/json", "idempotency-key": "alice-1" } },
    );
    expect(retry.headers.get("idempotent-replayed")).toBeNull();
    const again = ((await retry.json()) as any).memories[0];
    expect((await s.json("DELETE", `/v1/memory/${again.id}`)).status).toBe(200);
    erasedIds.push(again.id);

    // Bob is untouched.
    expect((await s.json("GET", `/v1/memory/${bob.id}`)).body.content).toBe("Bob likes chess");
  });

  test("the erasure itself stays on record: who, when, how many; a second erase also gets recorded", async () => {
    // The retried memory (and its delete) are erased by a second erasure.
    const second = await s.json("POST", "/v1/memory/erase", { namespace: "gdpr", entity: "alice" });
    expect(second.status).toBe(200);
    const list = await s.json("GET", "/v1/memory/erasures?namespace=gdpr&entity=alice");
    expect(list.status).toBe(200);
    expect(list.body).toHaveLength(2);
    expect(list.body[0]).toMatchObject({ namespace: "gdpr", entity: "alice", actorKeyId: "root", memories: 4 });
    expect(list.body[1].memories).toBe(5);
    expect(Date.parse(list.body[1].erasedAt)).toBeGreaterThanOrEqual(Date.parse(list.body[0].erasedAt));
    expect(JSON.stringify(list.body)).not.toContain(marker);
  });

  test("bad requests: 400, 403, 404, and nothing changes", async () => {
    await store("carol", "Carol likes tea");
    const before = await dumpStorage(s.server.core.storage);
    const cases: [string, string, string, unknown, number, string, string?][] = [
      ["no entity", "POST", "/v1/memory/erase", { namespace: "gdpr" }, 400, "invalid_request"],
      [
        "unknown field",
        "POST",
        "/v1/memory/erase",
        { namespace: "gdpr", entity: "carol", all: true },
        400,
        "invalid_request",
      ],
      [
        "control character",
        "POST",
        "/v1/memory/erase",
        { namespace: "gdpr", entity: "c\u0001" },
        400,
        "invalid_request",
      ],
      [
        "read_write key",
        "POST",
        "/v1/memory/erase",
        { namespace: "gdpr", entity: "carol" },
        403,
        "forbidden",
        writeKey,
      ],
      [
        "admin of another namespace",
        "POST",
        "/v1/memory/erase",
        { namespace: "gdpr", entity: "carol" },
        403,
        "forbidden",
        scopedAdmin,
      ],
      ["entity never seen", "POST", "/v1/memory/erase", { namespace: "gdpr", entity: "nobody" }, 404, "not_found"],
      ["erasures: no namespace", "GET", "/v1/memory/erasures?entity=carol", undefined, 400, "invalid_request"],
      ["erasures: read_write key", "GET", "/v1/memory/erasures?namespace=gdpr", undefined, 403, "forbidden", writeKey],
      [
        "erasures: admin elsewhere",
        "GET",
        "/v1/memory/erasures?namespace=gdpr",
        undefined,
        403,
        "forbidden",
        scopedAdmin,
      ],
    ];
    for (const [name, method, path, body, status, code, key] of cases) {
      const r = await s.json(method, path, body, key ? { key } : undefined);
      expect({ name, status: r.status, code: r.body?.error?.code }).toEqual({ name, status, code });
    }
    expect(await dumpStorage(s.server.core.storage)).toBe(before);
    expect((await s.json("GET", "/v1/memory?namespace=gdpr&entity=carol")).body.memories).toHaveLength(1);
  });

  test("an erasure among concurrent stores of the entity: what it erased is gone, what landed after it is whole", async () => {
    const ns = "erase-race";
    const put = (i: number) =>
      s.json("POST", "/v1/memory", { namespace: ns, entity: "dave", content: `Dave note ${i}`, infer: false });
    for (let i = 0; i < 10; i++) await put(i);
    // Writers keep storing while the erasure runs; the order of their commits is up to the store.
    const writers = Array.from({ length: 8 }, async (_, w) => {
      for (let i = 0; i < 10; i++) expect((await put(100 + w * 10 + i)).status).toBe(200);
    });
    const erased = s.json("POST", "/v1/memory/erase", { namespace: ns, entity: "dave" });
    await Promise.all(writers);
    expect((await erased).status).toBe(200);
    // Every current memory kept its content; every memory that lost it is no longer current.
    const current = (await s.json("GET", `/v1/memory?namespace=${ns}&entity=dave&limit=1000`)).body.memories;
    expect(current.filter((m: { content: string }) => m.content === "")).toEqual([]);
    const events = (await s.json("GET", `/v1/memory/events?namespace=${ns}&limit=1000`)).body;
    const currentIds = new Set(current.map((m: { id: string }) => m.id));
    const scrubbedAdds = events.filter((e: any) => e.event === "ADD" && e.reason === "erased");
    for (const e of scrubbedAdds)
      expect({ id: e.memoryId, current: currentIds.has(e.memoryId) }).toEqual({ id: e.memoryId, current: false });
    // The erasure counted exactly the memories it erased: the first 10, and the writers' stores that came before it.
    const [erasure] = (await s.json("GET", `/v1/memory/erasures?namespace=${ns}`)).body;
    expect(erasure.memories).toBe(scrubbedAdds.length);
    expect(erasure.memories + current.length).toBe(90);
  });

  test("no record of the store holds the marker any more", async () => {
    expect(await dumpStorage(s.server.core.storage)).not.toContain(marker);
    const exported = await (await s.api("GET", "/v1/export?namespace=gdpr")).text();
    expect(exported).toContain('"entity":"alice"');
    expect(exported).not.toContain(marker);
  });

  if (backend === "lmdb")
    test("after memd compact, no file of the data dir holds the marker (content, tags, metadata, source)", async () => {
      // Refused while the store is open (this test process serves it).
      const refused = await memd(["compact", "--data-dir", tmp.dir]);
      expect(refused.code).toBe(1);
      expect(refused.err).toContain("stop it first");
      await s.server.stop();
      // The server saved its keyword lists at close (only what is current: no marker in them).
      expect(snapshots().length).toBe(1);
      for (const f of snapshots()) {
        const bytes = readFileSync(join(snapshotDir(tmp.dir), f));
        const found = [marker, marker.toLowerCase()].some((n) => bytes.includes(Buffer.from(n)));
        expect({ snapshot: f, found }).toEqual({ snapshot: f, found: false });
      }
      const done = await memd(["compact", "--data-dir", tmp.dir]);
      expect({ code: done.code, err: done.err }).toEqual({ code: 0, err: "" });
      expect(done.out).toMatch(/^memd: compacted .* bytes -> \d+ bytes\n$/);
      const files = readdirSync(tmp.dir, { recursive: true }) as string[];
      expect(files.length).toBeGreaterThan(0);
      // As given, and as the keyword index keeps words (folded to lower case).
      const needles = [Buffer.from(marker), Buffer.from(marker.toLowerCase())];
      for (const f of files) {
        const path = join(tmp.dir, f);
        if (!statSync(path).isFile()) continue;
        const bytes = readFileSync(path);
        expect({ file: f, found: needles.some((n) => bytes.includes(n)) }).toEqual({ file: f, found: false });
      }
      // memd compact deletes the keyword snapshots: none may hold words erased since it was taken.
      expect(snapshots()).toEqual([]);
      // The store still opens and serves after compaction.
      s = await startTestServer({ dataDir: tmp.dir });
      expect((await s.json("GET", "/v1/memory?namespace=gdpr&entity=bob")).body.memories).toHaveLength(1);
      expect((await s.json("GET", "/v1/memory/erasures?namespace=gdpr")).body).toHaveLength(2);
    });
  else
    test("on PostgreSQL, memd compact prints what to run; after VACUUM FULL no row holds the marker", async () => {
      const r = await memd(["compact"]);
      expect(r.code).toBe(0);
      expect(r.out).toContain(
        "VACUUM (FULL, ANALYZE) memories, events, erasures, idempotency, memory_terms, memory_vectors, search_snapshots, search_snapshot_parts;",
      );
      const tables = [
        "memories",
        "events",
        "erasures",
        "idempotency",
        "memory_terms",
        "memory_vectors",
        "search_snapshots",
        "search_snapshot_parts",
      ];
      const sql = new SQL(s.databaseUrl!);
      try {
        await sql.unsafe(`VACUUM (FULL, ANALYZE) ${tables.join(", ")}`);
        for (const table of tables) {
          const [row] = await sql.unsafe(`SELECT count(*) AS n FROM ${table} t WHERE t::text LIKE '%${marker}%'`);
          expect({ table, n: Number(row.n) }).toEqual({ table, n: 0 });
        }
      } finally {
        await sql.close();
      }
      expect((await pgSnapshots()).held).toBe(0);
    });
});
