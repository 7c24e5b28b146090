// @targets lmdb
// The search-memory budget's order (src/storage/search-memory.ts): over the budget, namespaces
// loaded without a search go first, then the least recently searched, all of a namespace's
// structures at once, never the namespace searched last; sizes can grow and shrink; an owner's
// own drop is not an eviction.
import { expect, test } from "bun:test";
import { SearchMemory } from "../../src/storage/search-memory";

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
