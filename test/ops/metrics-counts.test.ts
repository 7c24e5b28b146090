// @targets lmdb postgres binary
// /metrics' memory and event counts, and memd export's progress total, are exactly what was
// written, from the first write on (LMDB counted each sub-database's shared-structures entry
// as one more record).
import { afterAll, beforeAll, expect, test } from "bun:test";
import { join } from "node:path";
import { runMemd, startTestServer, type TestServer, tempDir } from "../helpers";

let s: TestServer;
const tmp = tempDir("memd-counts-");
beforeAll(async () => {
  s = await startTestServer();
});
afterAll(async () => {
  await s.stop();
  tmp.cleanup();
});

async function counts() {
  const text = await (await s.api("GET", "/metrics")).text();
  const read = (name: string) => Number(new RegExp(`^${name} (\\d+)$`, "m").exec(text)?.[1]);
  return { memories: read("memd_memories"), records: read("memd_memory_records"), events: read("memd_events") };
}

test("counts start at 0 and follow each write exactly; export's progress ends at its total", async () => {
  expect(await counts()).toEqual({ memories: 0, records: 0, events: 0 });
  const add = (content: string) =>
    s.json("POST", "/v1/memory", { namespace: "counts", entity: "u", content, infer: false });
  const first = await add("the first fact");
  expect(first.status).toBe(200);
  expect(await counts()).toEqual({ memories: 1, records: 1, events: 1 });
  for (const c of ["second fact", "third fact", "fourth fact", "fifth fact"]) expect((await add(c)).status).toBe(200);
  expect((await s.json("DELETE", `/v1/memory/${first.body.memories[0].id}`)).status).toBe(200);
  expect(await counts()).toEqual({ memories: 4, records: 5, events: 6 });

  const place = s.databaseUrl ? ["--database-url", s.databaseUrl] : ["--data-dir", s.dataDir];
  const r = await runMemd(["export", ...place, "--out", join(tmp.dir, "all.jsonl")], {
    ...process.env,
    MEMD_DATA_DIR: "",
    MEMD_DATABASE_URL: "",
  });
  expect(r.code).toBe(0);
  // A slow export (under load) prints a line every 5 s before the end; the last one has the total.
  expect(r.err.trimEnd().split("\n").at(-1)).toMatch(/^export: 11\/11 records, /);
}, 60_000);
