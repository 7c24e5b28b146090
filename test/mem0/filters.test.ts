// mem0's filters compiled to memd reads: which reads (entity, tags) a filter makes, whether they
// are exact, and which memories its test keeps. A pure function, tested without a server.
import { describe, expect, test } from "bun:test";
import { compileFilters } from "../../src/mem0/service";
import type { MemoryRecord } from "../../src/storage/records";

const memory = (entity: string, tags?: string[], extra: Partial<MemoryRecord> = {}): MemoryRecord => ({
  id: "0190a5a4-0000-7000-8000-000000000000",
  namespace: "n",
  entity,
  content: "c",
  category: "general",
  importance: 0.5,
  ...(tags ? { tags } : {}),
  createdAt: Date.parse("2026-03-01T00:00:00Z"),
  updatedAt: Date.parse("2026-03-01T00:00:00Z"),
  state: "current",
  ...extra,
});

const alice = memory("alice");
const aliceWithBot = memory("alice", ["agent:bot", "run:r1"]);
const botAlone = memory("agent:bot", ["agent:bot"]);
const ben = memory("ben", undefined, { category: "work", metadata: { team: "red" } });
const all = [alice, aliceWithBot, botAlone, ben];

const scenarios: { name: string; filters: unknown; plans: unknown[]; exact: boolean; keeps: MemoryRecord[] }[] = [
  { name: "no filter", filters: {}, plans: [{ tags: [] }], exact: true, keeps: all },
  {
    name: "a user",
    filters: { user_id: "alice" },
    plans: [{ entity: "alice", tags: [] }],
    exact: true,
    keeps: [alice, aliceWithBot],
  },
  {
    name: "an agent, with or without a user",
    filters: { agent_id: "bot" },
    plans: [{ tags: ["agent:bot"] }],
    exact: true,
    keeps: [aliceWithBot, botAlone],
  },
  {
    name: "a user and a run: one read",
    filters: { AND: [{ user_id: "alice" }, { run_id: "r1" }] },
    plans: [{ entity: "alice", tags: ["run:r1"] }],
    exact: true,
    keeps: [aliceWithBot],
  },
  {
    name: "two users: two reads",
    filters: { OR: [{ user_id: "alice" }, { user_id: { in: ["ben"] } }] },
    plans: [
      { entity: "alice", tags: [] },
      { entity: "ben", tags: [] },
    ],
    exact: true,
    keeps: [alice, aliceWithBot, ben],
  },
  {
    name: "two users at once: nothing",
    filters: { user_id: "alice", AND: [{ user_id: "ben" }] },
    plans: [],
    exact: true,
    keeps: [],
  },
  {
    name: "any user",
    filters: { user_id: "*" },
    plans: [{ tags: [] }],
    exact: false,
    keeps: [alice, aliceWithBot, ben],
  },
  {
    name: "not alice",
    filters: { NOT: [{ user_id: "alice" }] },
    plans: [{ tags: [] }],
    exact: false,
    keeps: [botAlone, ben],
  },
  { name: "a category", filters: { categories: { in: ["Work"] } }, plans: [{ tags: [] }], exact: false, keeps: [ben] },
  { name: "metadata", filters: { metadata: { team: "red" } }, plans: [{ tags: [] }], exact: false, keeps: [ben] },
  {
    name: "created before",
    filters: { created_at: { lt: "2026-02-01" } },
    plans: [{ tags: [] }],
    exact: false,
    keeps: [],
  },
];

describe("compileFilters", () => {
  for (const s of scenarios)
    test(s.name, () => {
      const c = compileFilters(s.filters);
      expect(c.plans).toEqual(s.plans as never);
      expect(c.exact).toBe(s.exact);
      expect(all.filter(c.test)).toEqual(s.keeps);
    });

  test("a filter memd does not know is a 400 that lists what it knows, never dropped", () => {
    for (const bad of [{ keywords: "x" }, { user_id: 5 }, { created_at: { after: "2026-01-01" } }, { OR: "x" }])
      expect(() => compileFilters(bad)).toThrow(/memd supports user_id/);
  });
});
