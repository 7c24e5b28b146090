// @targets lmdb binary
// No cold first search after `memd import` (issue 32): the import saves the keyword lists of every
// namespace it made large (at least --keyword-prebuild current memories), so the first search of
// a server started afterwards, or of one that was running during the import, reads them instead
// of building them from the records, and answers exactly as the store the file came from.
// /metrics tells which: memd_keyword_lists_restored_total against memd_keyword_lists_built_total.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { lastKey } from "../../src/storage/lmdb/clock";
import { openLmdb } from "../../src/storage/lmdb/index";
import { runMemd, seededRandom, startTestServer, type TestServer, tempDir } from "../helpers";

const tmp = tempDir("memd-import-search-");
const file = join(tmp.dir, "big.jsonl");
// More than a packed namespace holds (packing.upTo, 256: those are never saved), above the threshold.
const big = 300;
const threshold = "200";
const queries = ["amber river", "cedar lantern", "quiet harbor maple", "violet"];
/** The source store's answers to `queries` in "big" and "small": what every import must answer. */
let expected: unknown[] = [];
// Keyword answers only (the built-in embedder, on by default, would make every search hybrid).
const env = { MEMD_EMBEDDER: "none", MEMD_KEYWORD_PREBUILD: "0" };

const memd = (args: string[]) =>
  runMemd(args, {
    ...process.env,
    MEMD_DATA_DIR: "",
    MEMD_DATABASE_URL: "",
    MEMD_KEYWORD_PREBUILD: threshold,
  });

const answers = async (s: TestServer) => {
  const out: unknown[] = [];
  for (const namespace of ["big", "small"])
    for (const query of queries) {
      const r = await s.json("POST", "/v1/memory/search", { namespace, query, limit: 10, mode: "keyword" });
      expect(r.status).toBe(200);
      out.push(r.body.results.map((x: any) => [x.id, x.score]));
    }
  return out;
};

async function counter(s: TestServer, name: string): Promise<number> {
  const text = await (await s.api("GET", "/metrics")).text();
  const m = new RegExp(`^${name} (\\d+)$`, "m").exec(text);
  expect(m).not.toBeNull();
  return Number(m![1]);
}

const snapshots = (dir: string) =>
  existsSync(join(dir, "search")) ? readdirSync(join(dir, "search")).filter((f) => f.endsWith(".bin")) : [];

beforeAll(async () => {
  const words = ["amber", "river", "cedar", "lantern", "quiet", "harbor", "maple", "violet", "stone", "linen"];
  const rand = seededRandom(32);
  const text = () => Array.from({ length: 3 + Math.floor(rand() * 4) }, () => words[Math.floor(rand() * 10)]).join(" ");
  const source = await startTestServer({ env });
  try {
    const stores = [
      ...Array.from({ length: big }, () => ["big", text()]),
      ...Array.from({ length: 3 }, (_, i) => ["big", `xylophone ${text()} ${i}`]),
      ...Array.from({ length: 12 }, () => ["small", text()]),
    ];
    let next = 0;
    const worker = async () => {
      for (let i = next++; i < stores.length; i = next++) {
        const [namespace, content] = stores[i];
        const r = await source.json("POST", "/v1/memory", { namespace, entity: `e${i % 3}`, content, infer: false });
        expect(r.status).toBe(200);
      }
    };
    await Promise.all(Array.from({ length: 8 }, worker));
    expected = await answers(source);
    const r = await memd(["export", "--data-dir", source.dataDir, "--out", file]);
    expect(r.code).toBe(0);
  } finally {
    await source.stop();
  }
}, 120_000);
afterAll(() => tmp.cleanup());

test("memd import saves the lists of the namespaces it made large: a server started afterwards reads them at its first search and answers exactly", async () => {
  const dir = join(tmp.dir, "restarted");
  const r = await memd(["import", file, "--data-dir", dir]);
  expect(r.code).toBe(0);
  expect(r.err).toContain("memd: keyword lists of 1 large namespace saved for their first search");
  // One snapshot: "big"'s ("small" is below the threshold), taken as of the store's last event, so
  // that a server reading it catches up from there (not from the namespace's first event).
  expect(snapshots(dir).length).toBe(1);
  // (Its header: a 4-byte length, then JSON at byte 8; keyword-snapshot.ts.)
  const bytes = readFileSync(join(dir, "search", snapshots(dir)[0]));
  const header = JSON.parse(bytes.subarray(8, 8 + bytes.readUInt32LE(0)).toString());
  expect(header.count).toBe(big + 3);
  const store = await openLmdb(dir);
  try {
    expect(header.stamp.clockEpoch).toBe(store.dbs.meta.get("clockEpoch"));
    expect(header.stamp.atSeq).toBe(lastKey(store.dbs.events));
    expect(header.stamp.atSeq).toBeGreaterThan(big);
  } finally {
    await store.close();
  }
  const s = await startTestServer({ dataDir: dir, env });
  try {
    expect(await answers(s)).toEqual(expected);
    expect(await counter(s, "memd_keyword_lists_restored_total")).toBe(1);
    // "small" only: built from its records.
    expect(await counter(s, "memd_keyword_lists_built_total")).toBe(1);
  } finally {
    await s.stop();
  }
}, 120_000);

test("into a running server: the first search after the import reads the lists it saved, and answers exactly", async () => {
  const dir = join(tmp.dir, "running");
  const s = await startTestServer({ dataDir: dir, env });
  try {
    const r = await memd(["import", file, "--data-dir", dir]);
    expect(r.code).toBe(0);
    expect(r.err).toContain("memd: keyword lists of 1 large namespace saved");
    expect(await answers(s)).toEqual(expected);
    expect(await counter(s, "memd_keyword_lists_restored_total")).toBe(1);
    expect(await counter(s, "memd_keyword_lists_built_total")).toBe(1);
  } finally {
    await s.stop();
  }
}, 120_000);

test("a server whose lists of the namespace were loaded before the import drops them: its next search sees every imported memory, and so does the next start", async () => {
  const dir = join(tmp.dir, "loaded");
  let s = await startTestServer({ dataDir: dir, env });
  const found = async (query: string) => {
    const r = await s.json("POST", "/v1/memory/search", { namespace: "big", query, limit: 50, mode: "keyword" });
    expect(r.status).toBe(200);
    return (r.body.results as { content: string }[]).map((x) => x.content).sort();
  };
  try {
    for (const content of ["quartz one", "quartz two"])
      expect(
        (await s.json("POST", "/v1/memory", { namespace: "big", entity: "e0", content, infer: false })).status,
      ).toBe(200);
    expect(await found("quartz")).toEqual(["quartz one", "quartz two"]);
    expect(await found("xylophone")).toEqual([]);
    const r = await memd(["import", file, "--data-dir", dir]);
    expect(r.code).toBe(0);
    const xylophones = await found("xylophone");
    expect(xylophones.length).toBe(3);
    expect(await found("quartz")).toEqual(["quartz one", "quartz two"]);
    await s.stop();
    s = await startTestServer({ dataDir: dir, env });
    expect(await found("xylophone")).toEqual(xylophones);
    expect(await found("quartz")).toEqual(["quartz one", "quartz two"]);
  } finally {
    await s.stop();
  }
}, 120_000);

test("below the threshold, or with --keyword-prebuild 0, an import saves no lists (the first search builds them)", async () => {
  const dir = join(tmp.dir, "off");
  const r = await runMemd(["import", file, "--data-dir", dir], {
    ...process.env,
    MEMD_DATA_DIR: "",
    MEMD_DATABASE_URL: "",
    MEMD_KEYWORD_PREBUILD: "0",
  });
  expect(r.code).toBe(0);
  expect(r.err).not.toContain("keyword lists");
  expect(snapshots(dir)).toEqual([]);
  const s = await startTestServer({ dataDir: dir, env });
  try {
    expect(await answers(s)).toEqual(expected);
    expect(await counter(s, "memd_keyword_lists_restored_total")).toBe(0);
    expect(await counter(s, "memd_keyword_lists_built_total")).toBe(2);
  } finally {
    await s.stop();
  }
}, 120_000);
