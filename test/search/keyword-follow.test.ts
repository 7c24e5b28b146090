// @targets lmdb
// No cold first search after a bulk load (issue 32; src/storage/lmdb/keyword-cache.ts,
// startFollowing): a namespace never searched that takes writes past the prebuild threshold has
// its keyword lists loaded in the background and then followed, commit by commit, so that its
// first search builds nothing (no load slice runs) and answers exactly as lists rebuilt from the
// records; a namespace below the threshold is not loaded. Such lists are not saved while the
// namespace takes writes: once they pause, or when it has grown fourfold.
import { afterAll, expect, test } from "bun:test";
import { existsSync, readdirSync } from "node:fs";
import { packing } from "../../src/index/keyword";
import { openLmdb } from "../../src/storage/lmdb/index";
import { followStats, prebuilding, snapshotting } from "../../src/storage/lmdb/keyword-cache";
import { snapshotDir } from "../../src/storage/lmdb/keyword-snapshot";
import { loading } from "../../src/storage/lmdb/touched";
import type { MemoryOp } from "../../src/storage/storage";
import { seededRandom, tempDir } from "../helpers";
import { keywordAnswers, rebuiltAnswers, vocab } from "./keyword-answers";

const tmp = tempDir();
const knobs = { ...prebuilding };
const slices = { ...loading };
const saves = { ...snapshotting };
const upTo = packing.upTo;
// Followed within 20 ms; the background snapshots' looks (keyword-prebuild.test.ts) not at all.
prebuilding.followMs = 20;
prebuilding.followFrom = 0; // (the prebuild threshold, 100, then)
prebuilding.startMs = 3_600_000;
prebuilding.everyMs = 3_600_000;
packing.upTo = 0;
// Loads in slices of 10, counted: a search that had to load its lists would run them.
let slicesRun = 0;
loading.slice = 10;
loading.backgroundSlice = 10;
loading.between = () => {
  slicesRun++;
  return new Promise((resolve) => setImmediate(resolve));
};
afterAll(() => {
  Object.assign(prebuilding, knobs);
  Object.assign(loading, slices);
  Object.assign(snapshotting, saves);
  packing.upTo = upTo;
  tmp.cleanup();
});

const waitFor = async (ok: () => boolean) => {
  for (let i = 0; i < 500 && !ok(); i++) await Bun.sleep(10);
  expect(ok()).toBe(true);
};

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

test("a namespace growing past the threshold is loaded and followed unsearched: its first search loads nothing and is exact", async () => {
  const rand = seededRandom(32);
  const ids: string[] = [];
  const s = await openLmdb(tmp.dir, { keywordPrebuild: 100 });
  const followed = followStats.followed;
  // Below the threshold: not followed, however long it waits.
  for (let i = 0; i < 6; i++) await s.apply(adds(rand, "grow", 10, ids), null);
  await s.apply(adds(rand, "small", 40, []), null);
  await Bun.sleep(200);
  expect(followStats.followed).toBe(followed);
  // Past it, in many commits as a bulk load's: loaded in the background, then followed.
  for (let i = 0; i < 10; i++) await s.apply(adds(rand, "grow", 10, ids), null);
  await waitFor(() => followStats.followed === followed + 1);
  // More changes, each followed as it commits.
  await s.apply(adds(rand, "grow", 30, ids), null);
  await s.apply(
    ids.slice(0, 15).map((target) => ({ event: "DELETE" as const, target, reason: "test" })),
    null,
  );
  const before = slicesRun;
  const here = await keywordAnswers(s, "grow");
  expect(slicesRun).toBe(before);
  await s.close();
  const expected = await rebuiltAnswers(tmp.dir, "grow");
  expect(here).toEqual(expected);
  expect(expected.some((a) => a.length > 0)).toBe(true);
  // The small namespace's first search did load (slices of 10 for its 40 memories).
  const t = await openLmdb(tmp.dir, { keywordPrebuild: 100 });
  const at = slicesRun;
  await keywordAnswers(t, "small");
  expect(slicesRun).toBeGreaterThan(at);
  await t.close();
});

test("a followed namespace is not saved while it grows: after its writes pause, or once it grew fourfold; answers exact throughout", async () => {
  const rand = seededRandom(33);
  const ids: string[] = [];
  const dir = tempDir();
  // Saves started: each calls between after its first piece (turnMs 0), in the turn it starts.
  let started = 0;
  snapshotting.turnMs = 0;
  snapshotting.after = 10;
  snapshotting.between = () => {
    started++;
    return new Promise((resolve) => setImmediate(resolve));
  };
  const files = () => (existsSync(snapshotDir(dir.dir)) ? readdirSync(snapshotDir(dir.dir)) : []);
  // Only growing fourfold saves it (not its writes pausing) until the end.
  prebuilding.savePaused = false;
  try {
    const s = await openLmdb(dir.dir, { keywordPrebuild: 100 });
    const followed = followStats.followed;
    for (let i = 0; i < 15; i++) await s.apply(adds(rand, "bulk", 10, ids), null);
    await waitFor(() => followStats.followed === followed + 1);
    // Built in the background (from 100 to 150 memories, the rest followed): not saved at once, nor
    // as it grows by 100 (changes at most 150 of 250 memories).
    for (let i = 0; i < 10; i++) await s.apply(adds(rand, "bulk", 10, ids), null);
    await Bun.sleep(100);
    expect(started).toBe(0);
    expect(files()).toEqual([]);
    // Past fourfold its size at the build (changes three quarters of its size; 500 of 650 at the
    // least): saved.
    for (let i = 0; i < 40; i++) await s.apply(adds(rand, "bulk", 10, ids), null);
    await waitFor(() => files().some((f) => f.endsWith(".bin")));
    expect(started).toBeGreaterThan(0);
    // Another namespace growing past the threshold, with saves after a pause on: saved once its
    // writes stop (a look with no change since the one before).
    prebuilding.savePaused = true;
    const bins = () => files().filter((f) => f.endsWith(".bin")).length;
    const saved = bins();
    for (let i = 0; i < 15; i++) await s.apply(adds(rand, "paused", 10, []), null);
    await waitFor(() => followStats.followed === followed + 2);
    await waitFor(() => bins() === saved + 1);
    await s.apply(
      ids.slice(0, 20).map((target) => ({ event: "DELETE" as const, target, reason: "test" })),
      null,
    );
    const here = await keywordAnswers(s, "bulk");
    await s.close();
    expect(here).toEqual(await rebuiltAnswers(dir.dir, "bulk"));
  } finally {
    dir.cleanup();
  }
});
