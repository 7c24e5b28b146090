// @targets lmdb postgres
// Exports keep both times: format 2 writes each memory's observedAt and the state each event
// left (so an imported store answers as-of reads as the source did); a format 1 file still
// imports, and its records read as records written before observedAt existed.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { backend, freshDatabase, runMemd, startTestServer, type TestServer, tempDir } from "../helpers";

const tmp = tempDir("memd-time-transfer-");
let s: TestServer;
const ns = "tx";
let lines: any[] = [];
let eventTimes: number[] = [];

const memd = (args: string[]) => runMemd(args, { ...process.env, MEMD_DATA_DIR: "", MEMD_DATABASE_URL: "" });

/** A fresh empty store of the backend under test, as memd flags and as server options. */
async function freshPlace(name: string) {
  if (backend === "postgres") {
    const url = await freshDatabase();
    // The later --database-url wins over the fresh one startTestServer gives.
    return { flags: ["--database-url", url], server: { args: ["--database-url", url] } };
  }
  const dir = join(tmp.dir, name);
  return { flags: ["--data-dir", dir], server: { dataDir: dir } };
}

const asOfList = async (t: TestServer, at: number) =>
  (await t.json("GET", `/v1/memory?namespace=${ns}&entity=u&limit=100&asOf=${new Date(at).toISOString()}`)).body
    .memories;

beforeAll(async () => {
  s = await startTestServer();
  const add = async (content: string, extra: Record<string, unknown> = {}) =>
    (await s.json("POST", "/v1/memory", { namespace: ns, entity: "u", content, infer: false, ...extra })).body
      .memories[0];
  const a = await add("Fay plays the cello", { observedAt: "2022-09-01T00:00:00Z", tags: ["music"] });
  await add("Fay lives in Oslo");
  await s.json("PATCH", `/v1/memory/${a.id}`, { content: "Fay plays the viola", tags: ["music", "strings"] });
  await s.json("DELETE", `/v1/memory/${a.id}`);
  const r = await s.api("GET", `/v1/export?namespace=${ns}`);
  expect(r.status).toBe(200);
  lines = (await r.text())
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l));
  eventTimes = lines.filter((l) => l.type === "event").map((l) => l.atMs);
});
afterAll(async () => {
  await s.stop();
  tmp.cleanup();
});

describe("format 2", () => {
  test("memory lines carry observedAt; event lines the state each event left", async () => {
    expect(lines[0]).toMatchObject({ type: "header", format: 2 });
    const cello = lines.find((l) => l.type === "memory" && l.content === "Fay plays the viola");
    expect(cello.observedAt).toBe(Date.parse("2022-09-01T00:00:00Z"));
    const update = lines.find((l) => l.type === "event" && l.event === "UPDATE");
    expect(update).toMatchObject({ importance: 0.5, tags: ["music", "strings"], observedAt: cello.observedAt });
  });

  test("an import answers every as-of read as the source did", async () => {
    const file = join(tmp.dir, "v2.jsonl");
    writeFileSync(file, `${lines.map((l) => JSON.stringify(l)).join("\n")}\n`);
    const place = await freshPlace("v2");
    const r = await memd(["import", file, ...place.flags]);
    expect({ code: r.code, err: r.err }).toMatchObject({ code: 0 });
    const t = await startTestServer(place.server);
    try {
      for (const at of eventTimes.flatMap((x) => [x - 1, x]))
        expect({ at, got: await asOfList(t, at) }).toEqual({ at, got: await asOfList(s, at) });
      const ev = async (x: TestServer) => (await x.json("GET", `/v1/memory/events?namespace=${ns}`)).body;
      expect(await ev(t)).toEqual(await ev(s));
    } finally {
      await t.stop();
    }
  });
});

describe("format 1 still imports", () => {
  test("without observed times: each memory was observed when created; as-of reads take older events' other fields from the record", async () => {
    const v1 = lines.map((l) => {
      if (l.type === "header") return { ...l, format: 1 };
      const { observedAt: _o, oldObservedAt: _p, importance, tags, metadata, expiresAt, ...rest } = l;
      if (l.type === "memory")
        return {
          ...rest,
          importance,
          ...(tags ? { tags } : {}),
          ...(metadata ? { metadata } : {}),
          ...(expiresAt !== undefined ? { expiresAt } : {}),
        };
      return rest;
    });
    const file = join(tmp.dir, "v1.jsonl");
    writeFileSync(file, `${v1.map((l) => JSON.stringify(l)).join("\n")}\n`);
    const place = await freshPlace("v1");
    const r = await memd(["import", file, ...place.flags]);
    expect({ code: r.code, err: r.err }).toMatchObject({ code: 0 });
    const t = await startTestServer(place.server);
    try {
      const now = (await t.json("GET", `/v1/memory?namespace=${ns}&entity=u`)).body.memories;
      expect(now.map((m: any) => m.content)).toEqual(["Fay lives in Oslo"]);
      expect(now[0].observedAt).toBe(now[0].createdAt);
      // Between the edit and the delete: the edited content (from the event) with the record's tags.
      const update = v1.find((l) => l.type === "event" && l.event === "UPDATE");
      const then = await asOfList(t, update.atMs);
      expect(then.map((m: any) => [m.content, m.tags ?? null])).toEqual([
        ["Fay lives in Oslo", null],
        ["Fay plays the viola", ["music", "strings"]],
      ]);
      const events = (await t.json("GET", `/v1/memory/events?namespace=${ns}`)).body;
      expect(events.every((e: any) => e.observedAt === null)).toBe(true);
    } finally {
      await t.stop();
    }
  });
});
