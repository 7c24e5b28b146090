// @targets lmdb
// Background keyword snapshots (src/storage/lmdb/keyword-cache.ts, the keywordPrebuild option,
// --keyword-prebuild): a namespace of at least the threshold's current memories gets its snapshot
// written without ever being searched (at start, as it grows, after an import), and its first
// search after a restart reads it and answers exactly as lists rebuilt from the records; a
// namespace below the threshold gets none; a search during a background build joins it. The
// threshold is set low (100) and the store looked at often, through the exported knobs.
import { afterAll, expect, test } from "bun:test";
import { existsSync, readdirSync } from "node:fs";
import { packing } from "../../src/index/keyword";
import { openLmdb } from "../../src/storage/lmdb/index";
import { prebuilding, prebuildStats, snapshotStats } from "../../src/storage/lmdb/keyword-cache";
import { snapshotDir } from "../../src/storage/lmdb/keyword-snapshot";
import { loading } from "../../src/storage/lmdb/touched";
import type { ExportRecord } from "../../src/storage/records";
import type { MemoryOp } from "../../src/storage/storage";
import { seededRandom, tempDir } from "../helpers";
import { keywordAnswers as answers, rebuiltAnswers as rebuilt, vocab } from "./keyword-answers";

const dirs: { cleanup: () => void }[] = [];
const knobs = { ...prebuilding };
prebuilding.startMs = 10;
prebuilding.everyMs = 50;
// (Namespaces growing past the threshold are followed too: keyword-follow.test.ts. Not here.)
prebuilding.followMs = 3_600_000;
// The namespaces here are small: as lists, not packed (packed ones are not snapshotted).
const upTo = packing.upTo;
packing.upTo = 0;
afterAll(() => {
  packing.upTo = upTo;
  Object.assign(prebuilding, knobs);
  for (const d of dirs) d.cleanup();
});
const threshold = 100;

/** Until `ok()`, for at most a minute: a background save on a busy machine may take seconds. */
const waitFor = async (ok: () => boolean) => {
  for (const end = Date.now() + 60_000; Date.now() < end && !ok(); ) await Bun.sleep(10);
  expect(ok()).toBe(true);
};
const snapshots = (dir: string) =>
  existsSync(snapshotDir(dir)) ? readdirSync(snapshotDir(dir)).filter((f) => f.endsWith(".bin")) : [];

function adds(rand: () => number, ns: string, n: number, ids: string[]): MemoryOp[] {
  return Array.from({ length: n }, () => {
    const id = Bun.randomUUIDv7();
    ids.push(id);
    const content = Array.from(
      { length: 2 + Math.floor(rand() * 5) },
      () => vocab[Math.floor(rand() * vocab.length)],
    ).join(" ");
    return {
      event: "ADD" as const,
      create: { id, namespace: ns, entity: `e${Math.floor(rand() * 3)}`, content, category: "fact", importance: 0.5 },
    };
  });
}

test("a namespace never searched gets its snapshot in the background (and again as it grows); one below the threshold gets none; its first search after a restart reads it", async () => {
  const tmp = tempDir();
  dirs.push(tmp);
  const rand = seededRandom(11);
  const ids: string[] = [];
  let s = await openLmdb(tmp.dir, { keywordPrebuild: threshold });
  const written = prebuildStats.written;
  await s.apply(adds(rand, "small", 40, []), null);
  await s.apply(adds(rand, "big", 150, ids), null);
  await s.apply(
    ids.slice(0, 10).map((target) => ({ event: "DELETE" as const, target, reason: "test" })),
    null,
  );
  await waitFor(() => prebuildStats.written === written + 1);
  // Two more looks at the store with nothing new: "small" (40) stays without a snapshot.
  const checks = prebuildStats.checks;
  await s.apply(adds(rand, "small", 5, []), null);
  await waitFor(() => prebuildStats.checks >= checks + 2);
  expect(snapshots(tmp.dir).length).toBe(1);
  // Grown by more than a tenth (at least the threshold) since: written again, still unsearched.
  await s.apply(adds(rand, "big", 120, ids), null);
  await waitFor(() => prebuildStats.written === written + 2);
  expect(snapshots(tmp.dir).length).toBe(1);
  // The lists were dropped after the save: the first search reads the snapshot.
  let restored = snapshotStats.restored;
  const here = await answers(s, "big");
  expect(snapshotStats.restored).toBe(restored + 1);
  await s.close();

  s = await openLmdb(tmp.dir);
  restored = snapshotStats.restored;
  const afterRestart = await answers(s, "big");
  expect(snapshotStats.restored).toBe(restored + 1);
  await s.close();
  const expected = await rebuilt(tmp.dir, "big");
  expect(afterRestart).toEqual(expected);
  expect(here).toEqual(expected);
  expect(expected.some((a) => a.length > 0)).toBe(true);
});

test("a store that stays busy still gets its background snapshot, after prebuilding.patience looks", async () => {
  const tmp = tempDir();
  dirs.push(tmp);
  const rand = seededRandom(13);
  const busy = prebuilding.busy;
  const patience = prebuilding.patience;
  // Busy at every look: more than 1 new event since the last, with a writer that never pauses.
  prebuilding.busy = 1;
  prebuilding.patience = 3;
  const s = await openLmdb(tmp.dir, { keywordPrebuild: threshold });
  try {
    const written = prebuildStats.written;
    // The look at start (which runs whatever the load) done first, on an empty store.
    const started = prebuildStats.checks;
    await waitFor(() => prebuildStats.checks > started);
    const checks = prebuildStats.checks;
    let stop = false;
    const writer = (async () => {
      while (!stop) await s.apply(adds(rand, "busy", 5, []), null);
    })();
    await waitFor(() => prebuildStats.written > written);
    stop = true;
    await writer;
    // Written while the writes went on, after the looks it waited (3 busy ones, at least).
    expect(prebuildStats.checks - checks).toBeGreaterThanOrEqual(prebuilding.patience);
    expect(snapshots(tmp.dir).length).toBe(1);
  } finally {
    prebuilding.busy = busy;
    prebuilding.patience = patience;
    await s.close();
  }
});

test("an import that makes a namespace big triggers a background snapshot", async () => {
  const from = tempDir();
  const to = tempDir();
  dirs.push(from, to);
  const src = await openLmdb(from.dir);
  await src.apply(adds(seededRandom(12), "imp", 130, []), null);
  const records: ExportRecord[] = [];
  for await (const r of src.exportAll({ namespaces: ["imp"], keys: false })) records.push(r);
  await src.close();

  let s = await openLmdb(to.dir, { keywordPrebuild: threshold });
  const written = prebuildStats.written;
  const checks = prebuildStats.checks;
  await waitFor(() => prebuildStats.checks > checks); // the look at start: nothing yet
  expect(snapshots(to.dir)).toEqual([]);
  await s.importRecords(records, { renumberEvents: false, skipExisting: false, skipIdentical: false });
  await waitFor(() => prebuildStats.written === written + 1);
  await s.close();

  s = await openLmdb(to.dir);
  const restored = snapshotStats.restored;
  const got = await answers(s, "imp");
  expect(snapshotStats.restored).toBe(restored + 1);
  await s.close();
  expect(got).toEqual(await rebuilt(to.dir, "imp"));
});

test("a search during a background build joins it: one build, then the lists stay loaded", async () => {
  const tmp = tempDir();
  dirs.push(tmp);
  const rand = seededRandom(13);
  let s = await openLmdb(tmp.dir);
  await s.apply(adds(rand, "join", 200, []), null);
  await s.close();

  const pace = { slice: loading.slice, backgroundSlice: loading.backgroundSlice, background: loading.background };
  let slices = 0;
  let release: () => void = () => {};
  const gate = new Promise<void>((resolve) => {
    release = resolve;
  });
  loading.slice = 20;
  loading.backgroundSlice = 20;
  // The background build stops after its first slice until the search has joined it.
  loading.background = () => {
    slices++;
    return gate;
  };
  try {
    const written = prebuildStats.written;
    const reloaded = snapshotStats.reloaded;
    s = await openLmdb(tmp.dir, { keywordPrebuild: threshold });
    await waitFor(() => slices === 1);
    const searching = answers(s, "join");
    release();
    const got = await searching;
    await waitFor(() => prebuildStats.written === written + 1);
    // Searched meanwhile: the saved lists are read back in place of the built ones (not dropped).
    await waitFor(() => snapshotStats.reloaded === reloaded + 1);
    expect(slices).toBe(1);
    const restored = snapshotStats.restored;
    expect(await answers(s, "join")).toEqual(got);
    expect(snapshotStats.restored).toBe(restored);
    await s.close();
    expect(got).toEqual(await rebuilt(tmp.dir, "join"));
  } finally {
    Object.assign(loading, pace);
    release();
  }
});
