// @targets lmdb
// The search-memory budget's order (src/storage/search-memory.ts): over the budget, namespaces
// loaded without a search go first, then the least recently searched, all of a namespace's
// structures at once, never the namespace searched last; sizes can grow and shrink; an owner's
// own drop is not an eviction; with smallShare (LMDB), small namespaces within a share of their own.
import { expect, test } from "bun:test";
import { idleCollect, SearchMemory, smallNamespaces } from "../../src/storage/search-memory";

// (The collections counted by the tests below are those made on the next turn; the idle one,
// checked last, waits far longer here.)
idleCollect.ms = 3_600_000;

test("released in order: unsearched, then least recently searched; never the last searched; evictions counted", () => {
  const m = new SearchMemory(100);
  const gone: string[] = [];
  const hold = (ns: string, kind: string, bytes: number, searched = true) =>
    m.hold(ns, kind, bytes, () => gone.push(`${ns}:${kind}`), searched);
  hold("a", "keyword", 30);
  hold("a", "vector", 10);
  hold("b", "keyword", 30);
  hold("big-unsearched", "keyword", 20, false);
  expect(m.held).toBe(90);
  expect(gone).toEqual([]);
  m.searched("a"); // b is now the least recently searched
  hold("c", "keyword", 30); // 120 > 100: the unsearched one goes first
  expect(gone).toEqual(["big-unsearched:keyword"]);
  expect(m.held).toBe(100);
  hold("c", "keyword", 40); // grown: 110 > 100, b goes
  expect(gone).toEqual(["big-unsearched:keyword", "b:keyword"]);
  expect(m.held).toBe(80);
  // A namespace larger than the budget alone stays while it is the last searched.
  m.searched("c");
  hold("c", "keyword", 500);
  expect(gone).toEqual(["big-unsearched:keyword", "b:keyword", "a:keyword", "a:vector"]);
  expect(m.holds("c", "keyword")).toBe(true);
  expect(m.namespaces).toBe(1);
  expect(m.evictions).toBe(4);
  // The owner letting go itself is no eviction.
  m.drop("c", "keyword");
  expect(m.held).toBe(0);
  expect(m.namespaces).toBe(0);
  expect(m.evictions).toBe(4);
  const metrics = m.metrics();
  expect(metrics.gauges.memd_search_memory_budget_bytes[1]).toBe(100);
  expect(metrics.counters.memd_search_memory_evictions_total[1]).toBe(4);
});

test("with smallShare, small namespaces are held within their share, least recently searched out first, never the last searched; large ones are not counted in it", () => {
  const MiB = 2 ** 20;
  const KiB = 1024;
  const m = new SearchMemory(256 * MiB, { collect: () => undefined, smallShare: true });
  // A sixty-fourth of the budget: 4 MiB.
  expect(m.smallBudget).toBe(4 * MiB);
  expect(m.metrics().gauges.memd_search_memory_small_budget_bytes[1]).toBe(4 * MiB);
  const gone: string[] = [];
  const hold = (ns: string, kind: string, bytes: number) => m.hold(ns, kind, bytes, () => gone.push(`${ns}:${kind}`));
  // 128 namespaces of 32 KiB (keyword 30 + vector 2): 4 MiB exactly, within the share.
  for (let i = 0; i < 128; i++) {
    m.searched(`s${i}`);
    hold(`s${i}`, "keyword", 30 * KiB);
    hold(`s${i}`, "vector", 2 * KiB);
  }
  // A large namespace (over smallNamespaces.upTo) is counted in the budget only.
  m.searched("large");
  hold("large", "keyword", 100 * MiB);
  expect(gone).toEqual([]);
  m.searched("s0"); // s1 is now the least recently searched small one
  m.searched("s128");
  hold("s128", "keyword", 32 * KiB);
  expect(gone).toEqual(["s1:keyword", "s1:vector"]);
  expect(m.holds("s0", "keyword")).toBe(true);
  // A small namespace that grows past upTo leaves the share (and makes room in it).
  m.searched("s2");
  hold("s2", "keyword", 2 * MiB);
  m.searched("s129");
  hold("s129", "keyword", 32 * KiB);
  expect(gone).toEqual(["s1:keyword", "s1:vector"]);
  expect(m.evictions).toBe(2);
  expect(m.held).toBe(100 * MiB + 2 * MiB + 2 * KiB + 128 * 32 * KiB);
  // Never the namespace searched last, even when it alone is over the share.
  const one = new SearchMemory(64 * MiB, { collect: () => undefined, smallShare: true });
  expect(smallNamespaces.least).toBe(2 * MiB);
  expect(one.smallBudget).toBe(smallNamespaces.least);
  smallNamespaces.upTo = 8 * MiB;
  try {
    one.searched("a");
    one.hold("a", "keyword", 1 * MiB, () => gone.push("a"));
    one.hold("b", "keyword", 0.5 * MiB, () => gone.push("b"), false); // loaded without a search: after a
    one.searched("a");
    one.hold("a", "keyword", 3 * MiB, () => gone.push("a"));
    expect(gone.slice(2)).toEqual(["b"]);
    expect(one.holds("a", "keyword")).toBe(true);
  } finally {
    smallNamespaces.upTo = 64 * KiB;
  }
  // Without smallShare (PostgreSQL), or when the share would be the whole budget: no share.
  expect(new SearchMemory(256 * MiB).smallBudget).toBe(Number.POSITIVE_INFINITY);
  expect(new SearchMemory(2 * MiB, { smallShare: true }).smallBudget).toBe(Number.POSITIVE_INFINITY);
  expect(new SearchMemory(256 * MiB).metrics().gauges.memd_search_memory_small_budget_bytes[1]).toBe(0);
});

test("a full collection on the next turn once a sixteenth of the budget (at least 4 MiB) was released, once per burst", async () => {
  const MiB = 2 ** 20;
  let collected = 0;
  const m = new SearchMemory(64 * MiB, { collect: () => collected++ });
  const hold = (ns: string, bytes: number) => m.hold(ns, "keyword", bytes, () => undefined);
  for (let i = 0; i < 64; i++) hold(`n${i}`, MiB); // 64 MiB: nothing released
  await new Promise((r) => setImmediate(r));
  expect(collected).toBe(0);
  for (let i = 64; i < 67; i++) hold(`n${i}`, MiB); // 3 MiB released: under 4
  await new Promise((r) => setImmediate(r));
  expect([m.evictions, collected]).toEqual([3, 0]);
  for (let i = 67; i < 75; i++) hold(`n${i}`, MiB); // 11 MiB released in all: one collection, not on this turn
  expect(collected).toBe(0);
  await new Promise((r) => setImmediate(r));
  expect(collected).toBe(1);
  expect(m.metrics().counters.memd_search_memory_collections_total[1]).toBe(1);
  // Counted again from the collection: 3 more MiB are not enough.
  for (let i = 75; i < 78; i++) hold(`n${i}`, MiB);
  await new Promise((r) => setImmediate(r));
  expect(collected).toBe(1);
  // An owner's own drop releases nothing to collect; without a budget nothing is ever released.
  m.drop("n77", "keyword");
  const unbounded = new SearchMemory(Number.POSITIVE_INFINITY, { collect: () => collected++ });
  for (let i = 0; i < 100; i++) unbounded.hold(`n${i}`, "keyword", MiB, () => undefined);
  await new Promise((r) => setImmediate(r));
  expect(collected).toBe(1);
});

test("what searches made and let go counts towards the next collection as releases do; without a budget, never", async () => {
  const MiB = 2 ** 20;
  let collected = 0;
  const m = new SearchMemory(64 * MiB, { collect: () => collected++ });
  m.hold("a", "keyword", MiB, () => undefined);
  for (let i = 0; i < 3; i++) m.transient(MiB);
  await new Promise((r) => setImmediate(r));
  expect(collected).toBe(0);
  m.transient(MiB); // 4 MiB let go: one collection, on the next turn
  expect(collected).toBe(0);
  await new Promise((r) => setImmediate(r));
  expect([collected, m.evictions, m.held]).toEqual([1, 0, MiB]);
  const unbounded = new SearchMemory(Number.POSITIVE_INFINITY, { collect: () => collected++ });
  for (let i = 0; i < 100; i++) unbounded.transient(MiB);
  await new Promise((r) => setImmediate(r));
  expect(collected).toBe(1);
});

test("once nothing was counted for a while, a full collection if at least idleCollect.min was let go since the last; without a budget, never", async () => {
  const MiB = 2 ** 20;
  let collected = 0;
  const m = new SearchMemory(64 * MiB, { collect: () => collected++ });
  const unbounded = new SearchMemory(Number.POSITIVE_INFINITY, { collect: () => collected++ });
  const was = { ...idleCollect };
  idleCollect.ms = 20;
  idleCollect.cpuMs = () => 0; // the process quiet whatever else runs beside the test
  try {
    m.hold("a", "keyword", MiB, () => undefined);
    m.transient(idleCollect.min / 2); // under the idle minimum: armed, but not enough
    unbounded.transient(8 * MiB);
    await Bun.sleep(200);
    expect(collected).toBe(0);
    m.transient(idleCollect.min); // under a sixteenth of the budget, so not on the next turn...
    await new Promise((r) => setImmediate(r));
    expect(collected).toBe(0);
    // ...but once quiet (bounded wait: a loaded machine runs timers late).
    for (let i = 0; i < 500 && collected === 0; i++) await Bun.sleep(20);
    expect([collected, m.collections, m.held]).toEqual([1, 1, MiB]);
    // Counted again from that collection: nothing let go since, nothing more.
    m.searched("a");
    await Bun.sleep(200);
    expect(collected).toBe(1);
  } finally {
    Object.assign(idleCollect, was);
  }
});

test("the idle collection shrinks (collectIdle) at most once every idleCollect.shrinkEvery ms (shrinkSoonest after shrinkAfter was let go), a full collection between", async () => {
  const MiB = 2 ** 20;
  const calls: string[] = [];
  const m = new SearchMemory(64 * MiB, {
    collect: () => calls.push("collect"),
    collectIdle: () => calls.push("shrink"),
  });
  const was = { ...idleCollect };
  idleCollect.ms = 20;
  idleCollect.shrinkEvery = 3_600_000;
  idleCollect.cpuMs = () => 0;
  try {
    for (const expected of [["shrink"], ["shrink", "collect"], ["shrink", "collect", "collect"]]) {
      m.transient(idleCollect.min);
      for (let i = 0; i < 500 && calls.length < expected.length; i++) await Bun.sleep(20);
      expect(calls).toEqual(expected);
    }
    // Once shrinkEvery has passed, it shrinks again.
    idleCollect.shrinkEvery = 0;
    m.transient(idleCollect.min);
    for (let i = 0; i < 500 && calls.length < 4; i++) await Bun.sleep(20);
    expect(calls).toEqual(["shrink", "collect", "collect", "shrink"]);
    expect(m.collections).toBe(4);
    // Once shrinkAfter was let go since the last shrink, shrinkSoonest applies instead.
    idleCollect.shrinkEvery = 3_600_000;
    idleCollect.shrinkSoonest = 0;
    m.transient(idleCollect.min);
    for (let i = 0; i < 500 && calls.length < 5; i++) await Bun.sleep(20);
    expect(calls.at(-1)).toBe("collect");
    // (16 MiB let go: a full collection on the next turn, then the shrink once quiet.)
    m.transient(idleCollect.shrinkAfter);
    for (let i = 0; i < 500 && calls.length < 7; i++) await Bun.sleep(20);
    expect(calls.slice(4)).toEqual(["collect", "collect", "shrink"]);
  } finally {
    Object.assign(idleCollect, was);
  }
});

test("no idle collection while the process is busy (stores at full speed count nothing here); one once it is quiet", async () => {
  const MiB = 2 ** 20;
  let collected = 0;
  const m = new SearchMemory(64 * MiB, { collect: () => collected++ });
  const was = { ...idleCollect };
  idleCollect.ms = 20;
  // A process using a whole core while busy, none after.
  let busy = true;
  let cpu = 0;
  let last = performance.now();
  idleCollect.cpuMs = () => {
    const now = performance.now();
    if (busy) cpu += now - last;
    last = now;
    return cpu;
  };
  try {
    m.transient(idleCollect.min);
    await Bun.sleep(300);
    expect(collected).toBe(0);
    busy = false;
    for (let i = 0; i < 500 && collected === 0; i++) await Bun.sleep(20);
    expect(collected).toBe(1);
  } finally {
    Object.assign(idleCollect, was);
  }
});
