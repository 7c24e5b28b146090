// @targets lmdb postgres binary
// memd import never loses audit history. Importing another store's export into a store that
// already has events: the file's seqs are held by other events, so its events take new seqs
// (times, contents and order per namespace kept), a memory's history comes along whole, and an
// interrupted import run again adds no event twice. A file that could only be imported by
// changing its events' order is refused before anything is written, naming why.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { dumpStorage, runMemd, startTestServer, type TestServer, tempDir } from "../helpers";

const tmp = tempDir("memd-import-history-");
let a: TestServer;
let file: string;
/** The other store's events per namespace, as its API answered them (newest first). */
const bEvents = new Map<string, any[]>();
let bMemoryIds: string[] = [];

const memd = (args: string[]) => runMemd(args, { ...process.env, MEMD_DATA_DIR: "", MEMD_DATABASE_URL: "" });
const place = (s: TestServer) => (s.databaseUrl ? ["--database-url", s.databaseUrl] : ["--data-dir", s.dataDir]);
const events = async (s: TestServer, ns: string) =>
  (await s.json("GET", `/v1/memory/events?namespace=${ns}&limit=1000`)).body as any[];
const withoutId = (e: any) => {
  const { id: _id, ...rest } = e;
  return rest;
};

/** A history with adds, an update and a delete, in a namespace both stores share and one of its own. */
async function history(s: TestServer, own: string, who: string) {
  const ids: string[] = [];
  for (const [ns, i] of [
    ["shared", 1],
    [own, 2],
    ["shared", 3],
    [own, 4],
  ] as const) {
    const r = await s.json("POST", "/v1/memory", {
      namespace: ns,
      entity: who,
      content: `${who} fact ${i}`,
      infer: false,
    });
    expect(r.status).toBe(200);
    ids.push(r.body.memories[0].id);
  }
  expect((await s.json("PATCH", `/v1/memory/${ids[0]}`, { content: `${who} fact 1, edited` })).status).toBe(200);
  expect((await s.json("DELETE", `/v1/memory/${ids[1]}`)).status).toBe(200);
  return ids;
}

beforeAll(async () => {
  a = await startTestServer();
  await history(a, "a", "alice");
  const b = await startTestServer();
  try {
    bMemoryIds = await history(b, "b", "bob");
    for (const ns of ["shared", "b"]) bEvents.set(ns, await events(b, ns));
    file = join(tmp.dir, "b.jsonl");
    const r = await memd(["export", ...place(b), "--out", file]);
    expect(r.code).toBe(0);
  } finally {
    await b.stop();
  }
}, 60_000);
afterAll(async () => {
  await a.stop();
  tmp.cleanup();
});

test("a file that would need its events reordered is refused before anything is written, naming why", async () => {
  const lines = readFileSync(file, "utf8").trim().split("\n");
  const firstEvent = lines.findIndex((l) => l.includes('"type":"event"'));
  [lines[firstEvent], lines[firstEvent + 1]] = [lines[firstEvent + 1], lines[firstEvent]];
  const swapped = join(tmp.dir, "swapped.jsonl");
  writeFileSync(swapped, `${lines.join("\n")}\n`);
  const before = await dumpStorage(a.server.core.storage);
  for (const extra of [[], ["--skip-existing"]]) {
    const r = await memd(["import", swapped, ...extra, ...place(a)]);
    expect({ extra, code: r.code }).toEqual({ extra, code: 1 });
    expect(r.err).toMatch(
      new RegExp(
        `refused, nothing written: line ${firstEvent + 2}: event \\d+ comes after event \\d+ in the file: \\d+ of the file's event seqs are held by other events in this store`,
      ),
    );
  }
  expect(await dumpStorage(a.server.core.storage)).toBe(before);
}, 60_000);

test("into a store with events: new seqs, times, contents and order kept, every memory's history whole; a rerun adds nothing", async () => {
  const aBefore = new Map<string, any[]>();
  for (const ns of ["shared", "a"]) aBefore.set(ns, await events(a, ns));
  const lines = readFileSync(file, "utf8").trim().split("\n");
  // An import that stopped part way: the memories and the first two events (with
  // --skip-existing, which once left out every event whose seq was taken).
  const firstEvent = lines.findIndex((l) => l.includes('"type":"event"'));
  const part = join(tmp.dir, "part.jsonl");
  writeFileSync(part, `${lines.slice(0, firstEvent + 2).join("\n")}\n`);
  const first = await memd(["import", part, "--skip-existing", ...place(a)]);
  expect(first.code).toBe(0);
  expect(first.err).toContain("2 events took new sequence numbers");
  // The whole file: the rest of it, nothing twice.
  const whole = await memd(["import", file, ...place(a)]);
  expect(whole.code).toBe(0);
  const bTotal = lines.filter((l) => l.includes('"type":"event"')).length;
  expect(whole.err).toContain(`${bTotal - 2} events took new sequence numbers`);
  // Again: every record is there now.
  const again = await memd(["import", file, ...place(a)]);
  expect(again.code).toBe(1);
  expect(again.err).toMatch(/already exists, as does every record of the file/);
  const skipping = await memd(["import", file, "--skip-existing", ...place(a)]);
  expect(skipping.code).toBe(0);
  expect(skipping.err).toContain("imported 0 records");
  // One of those events under a seq that is free here (as another export of the same store may
  // number it): found at its new seq all the same, and not written again.
  const oneEvent = JSON.parse(lines[firstEvent]);
  const moved = join(tmp.dir, "moved-seq.jsonl");
  writeFileSync(moved, `${lines[0]}\n${JSON.stringify({ ...oneEvent, seq: 1_000_000 })}\n`);
  const movedRun = await memd(["import", moved, "--skip-existing", ...place(a)]);
  expect({ code: movedRun.code, err: movedRun.err }).toMatchObject({
    code: 0,
    err: expect.stringContaining("imported 0 records"),
  });

  // The other store's own namespace: the same events in the same order, only their ids are new.
  const b = await events(a, "b");
  expect(b.map(withoutId)).toEqual(bEvents.get("b")!.map(withoutId));
  // The shared namespace: this store's events as they were, and the other's, each in their order.
  const shared = await events(a, "shared");
  const mine = new Set(aBefore.get("shared")!.map((e) => e.id));
  expect(shared.filter((e) => mine.has(e.id))).toEqual(aBefore.get("shared")!);
  expect(shared.filter((e) => !mine.has(e.id)).map(withoutId)).toEqual(bEvents.get("shared")!.map(withoutId));
  expect(await events(a, "a")).toEqual(aBefore.get("a")!);
  expect(shared).toHaveLength(aBefore.get("shared")!.length + bEvents.get("shared")!.length);
  // Every imported memory has its whole history.
  for (const id of bMemoryIds) {
    const own = (await a.json("GET", `/v1/memory/events?memoryId=${id}`)).body as any[];
    const was = [...bEvents.get("shared")!, ...bEvents.get("b")!].filter((e) => e.memoryId === id);
    expect(own.length).toBeGreaterThan(0);
    expect(own.map(withoutId)).toEqual(was.map(withoutId));
  }
  // The running server's next event comes after all of them.
  const ids = [...shared, ...b].map((e) => Number(e.id));
  const next = await a.json("POST", "/v1/memory", { namespace: "b", entity: "carol", content: "later", infer: false });
  expect(next.status).toBe(200);
  const [newest] = await events(a, "b");
  expect(newest.newContent).toBe("later");
  expect(Number(newest.id)).toBeGreaterThan(Math.max(...ids));
  expect(new Set(ids).size).toBe(ids.length);
}, 60_000);
