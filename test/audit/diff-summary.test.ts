import { describe, expect, test } from "bun:test";
import { summarizeDiff } from "../../src/audit/diff";
import type { EventKind, EventRecord } from "../../src/audit/model";

let seq = 0;
const ev = (event: EventKind, memoryId: string, f: Partial<EventRecord> = {}): EventRecord => ({
  seq: ++seq,
  atMs: 1_700_000_000_000 + seq,
  namespace: "n",
  entity: "e",
  memoryId,
  event,
  oldContent: null,
  newContent: null,
  mergedFromId: null,
  reason: null,
  category: "general",
  actorKeyId: null,
  ...f,
});

describe("summarizeDiff: net change per memory", () => {
  const cases: { name: string; events: EventRecord[]; expect: Record<string, unknown> }[] = [
    {
      name: "changed and changed back: no net change",
      events: [
        ev("UPDATE", "a", { oldContent: "orig", newContent: "changed", reason: "edited" }),
        ev("UPDATE", "a", { oldContent: "changed", newContent: "orig", reason: "edited" }),
      ],
      expect: { updated: [], created: [], changeCount: 0, summary: "0 new, 0 updated, 0 replaced" },
    },
    {
      name: "created, then its content and category edited: the latest of both",
      events: [
        ev("ADD", "a", { newContent: "Old text", category: "cat1" }),
        ev("UPDATE", "a", { oldContent: "Old text", newContent: "New text", category: "cat2", reason: "edited" }),
      ],
      expect: { created: [{ id: "a", content: "New text", category: "cat2" }] },
    },
    {
      name: "created, then only its category edited: the latest category",
      events: [
        ev("ADD", "a", { newContent: "text", category: "cat1" }),
        ev("UPDATE", "a", { oldContent: "text", newContent: "text", category: "cat2", reason: "edited" }),
      ],
      expect: { created: [{ id: "a", content: "text", category: "cat2" }] },
    },
    {
      name: "a chain of replacements: the last replacement's category",
      events: [
        ev("REPLACE", "b2", { mergedFromId: "b1", oldContent: "B1", newContent: "B2", category: "x" }),
        ev("REPLACE", "b3", { mergedFromId: "b2", oldContent: "B2", newContent: "B3", category: "y" }),
      ],
      expect: { replaced: [{ oldId: "b1", oldContent: "B1", newId: "b3", newContent: "B3", category: "y" }] },
    },
    {
      name: "created then merged: one created item with the latest content",
      events: [ev("ADD", "a", { newContent: "v1" }), ev("MERGE", "a", { oldContent: "v1", newContent: "v2" })],
      expect: { created: [{ id: "a", content: "v2" }], updated: [], deleted: [], replaced: [] },
    },
    {
      name: "created then deleted inside the window: left out",
      events: [ev("ADD", "a", { newContent: "v1" }), ev("DELETE", "a", { oldContent: "v1", reason: "expired" })],
      expect: { created: [], updated: [], deleted: [], replaced: [] },
    },
    {
      name: "merged twice: one updated item, first previousContent, last content",
      events: [
        ev("MERGE", "a", { oldContent: "v0", newContent: "v1" }),
        ev("MERGE", "a", { oldContent: "v1", newContent: "v2" }),
      ],
      expect: { updated: [{ id: "a", content: "v2", previousContent: "v0" }], created: [] },
    },
    {
      name: "updated then deleted: one deleted item with the content the client last knew",
      events: [
        ev("MERGE", "a", { oldContent: "v0", newContent: "v1" }),
        ev("DELETE", "a", { oldContent: "v1", reason: "gone" }),
      ],
      expect: { updated: [], deleted: [{ id: "a", content: "v0", reason: "gone" }] },
    },
    {
      name: "replacement shows only in replaced",
      events: [
        ev("REPLACE", "b", { oldContent: "old", newContent: "new", mergedFromId: "a", reason: "contradiction" }),
      ],
      expect: {
        created: [],
        replaced: [{ oldId: "a", oldContent: "old", newId: "b", newContent: "new", reason: "contradiction" }],
      },
    },
    {
      name: "added then replaced inside the window: still only in replaced",
      events: [
        ev("ADD", "a", { newContent: "old" }),
        ev("REPLACE", "b", { oldContent: "old", newContent: "new", mergedFromId: "a", reason: "contradiction" }),
      ],
      expect: { created: [], replaced: [{ oldId: "a", newId: "b", newContent: "new" }] },
    },
    {
      name: "chain A→B→C is one A→C item",
      events: [
        ev("REPLACE", "b", { oldContent: "A", newContent: "B", mergedFromId: "a", reason: "contradiction" }),
        ev("REPLACE", "c", { oldContent: "B", newContent: "C", mergedFromId: "b", reason: "newer" }),
      ],
      expect: {
        replaced: [{ oldId: "a", oldContent: "A", newId: "c", newContent: "C", reason: "newer" }],
        created: [],
      },
    },
    {
      name: "replacement merged later: replaced item carries the latest content",
      events: [
        ev("REPLACE", "b", { oldContent: "A", newContent: "B", mergedFromId: "a", reason: "contradiction" }),
        ev("MERGE", "b", { oldContent: "B", newContent: "B+" }),
      ],
      expect: { replaced: [{ oldId: "a", newId: "b", newContent: "B+" }], updated: [] },
    },
    {
      name: "replacement deleted later: the original shows as deleted",
      events: [
        ev("REPLACE", "b", { oldContent: "A", newContent: "B", mergedFromId: "a", reason: "contradiction" }),
        ev("DELETE", "b", { oldContent: "B", reason: "deleted" }),
      ],
      expect: { replaced: [], deleted: [{ id: "a", content: "A" }] },
    },
    {
      name: "skips and keeps change nothing",
      events: [
        ev("SKIP_DUPLICATE", "a", { newContent: "x" }),
        ev("KEEP_EXISTING", "a", { newContent: "y", reason: "r" }),
      ],
      expect: { created: [], updated: [], deleted: [], replaced: [], changeCount: 0 },
    },
  ];
  for (const c of cases)
    test(c.name, () => {
      const d = summarizeDiff(c.events);
      expect(d).toMatchObject(c.expect);
      expect(d.changeCount).toBe(d.created.length + d.updated.length + d.deleted.length + d.replaced.length);
      expect(d.summary).toBe(`${d.created.length} new, ${d.updated.length} updated, ${d.replaced.length} replaced`);
      const ids = [...d.created.map((x) => x.id), ...d.updated.map((x) => x.id), ...d.deleted.map((x) => x.id)];
      expect(new Set(ids).size).toBe(ids.length);
    });
});
