// @targets lmdb
// No cold first search after a bulk load (issue 32; src/storage/lmdb/keyword-cache.ts,
// startFollowing): a namespace never searched that takes writes past the prebuild threshold has
// its keyword lists loaded in the background and then followed, commit by commit, so that its
// first search builds nothing (no load slice runs) and answers exactly as lists rebuilt from the
// records; a namespace below the threshold is not loaded.
import { afterAll, expect, test } from "bun:test";
import { packing } from "../../src/index/keyword";
import { openLmdb } from "../../src/storage/lmdb/index";
import { followStats, prebuilding } from "../../src/storage/lmdb/keyword-cache";
import { loading } from "../../src/storage/lmdb/touched";
import type { MemoryOp } from "../../src/storage/storage";
import { seededRandom, tempDir } from "../helpers";
import { keywordAnswers, rebuiltAnswers, vocab } from "./keyword-answers";

const tmp = tempDir();
const knobs = { ...prebuilding };
const slices = { ...loading };
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
