// The as-of rules both backends share (src/storage/asof.ts), as pure functions: what an event
// says about each memory it touches, the fold of those marks, and the version of a memory at an
// instant, older events (content and category only) and erased memories included.
import { expect, test } from "bun:test";
import { candidates, foldEvent, foldMarks, type Latest, stateMarks, versionAt } from "../../src/storage/asof";
import type { EventRecord, MemoryRecord } from "../../src/storage/records";

const A = "01900000-0000-7000-8000-00000000000a";
const B = "01900000-0000-7000-8000-00000000000b";

const event = (over: Partial<EventRecord>): EventRecord => ({
  seq: 1,
  namespace: "n",
  entity: "e",
  memoryId: A,
  event: "ADD",
  oldContent: null,
  newContent: "x",
  mergedFromId: null,
  reason: null,
  category: "general",
  atMs: 100,
  actorKeyId: null,
  ...over,
});
const record = (over: Partial<MemoryRecord> = {}): MemoryRecord => ({
  id: A,
  namespace: "n",
  entity: "e",
  content: "now",
  category: "general",
  importance: 0.9,
  tags: ["now"],
  createdAt: 100,
  updatedAt: 300,
  state: "current",
  ...over,
});

test.each([
  ["ADD", event({ importance: 0.5 }), `+${A}`],
  ["ADD with a TTL", event({ importance: 0.5, expiresAt: 5000 }), `+${A}@5000`],
  ["REPLACE: the new one lives, the old one is retired", event({ event: "REPLACE", mergedFromId: B }), `+${A},-${B}`],
  ["DELETE", event({ event: "DELETE", newContent: null }), `-${A}`],
  ["SKIP_DUPLICATE changes nothing", event({ event: "SKIP_DUPLICATE" }), ""],
  ["KEEP_EXISTING changes nothing", event({ event: "KEEP_EXISTING" }), ""],
])("marks: %s", (_name, e, marks) => {
  expect(stateMarks(e)).toBe(marks);
  // Folding the marks and folding the event read whole agree.
  const a = new Map<string, Latest>();
  const b = new Map<string, Latest>();
  foldMarks(a, e.seq, marks);
  foldEvent(b, e);
  expect(a).toEqual(b);
});

test("candidates: alive, not expired at the instant, after the cursor, newest first", () => {
  const latest = new Map<string, Latest>([
    [A, { seq: 1, alive: true }],
    [B, { seq: 2, alive: true, expiresAt: 200 }],
    ["01900000-0000-7000-8000-00000000000c", { seq: 3, alive: false }],
  ]);
  expect(candidates(latest, 199)).toEqual([B, A]);
  expect(candidates(latest, 200)).toEqual([A]);
  expect(candidates(latest, 150, B)).toEqual([A]);
});

test("versionAt: an event carrying the state answers from the event, times from the record", () => {
  const e = event({ event: "UPDATE", atMs: 200, newContent: "then", importance: 0.2, tags: ["then"], observedAt: 50 });
  expect(versionAt(A, e, record({ source: "chat" }), 250)).toEqual({
    id: A,
    namespace: "n",
    entity: "e",
    content: "then",
    category: "general",
    importance: 0.2,
    tags: ["then"],
    source: "chat",
    createdAt: 100,
    updatedAt: 200,
    state: "current",
    observedAt: 50,
  });
});

test("versionAt: an older event (content and category only) takes the other fields from the record", () => {
  const v = versionAt(A, event({ atMs: 100, newContent: "then" }), record({ observedAt: 42 }), 150);
  expect(v).toMatchObject({ content: "then", importance: 0.9, tags: ["now"], observedAt: 42, updatedAt: 100 });
  expect(versionAt(A, event({}), record({ expiresAt: 150 }), 150)).toBeUndefined();
});

test("versionAt: gone when deleted, replaced, expired or erased", () => {
  expect(versionAt(A, event({ event: "DELETE", newContent: null }), record(), 150)).toBeUndefined();
  expect(versionAt(B, event({ event: "REPLACE", mergedFromId: B }), record({ id: B }), 150)).toBeUndefined();
  expect(versionAt(A, event({ importance: 0.5, expiresAt: 150 }), record(), 150)).toBeUndefined();
  expect(versionAt(A, event({ importance: 0.5, expiresAt: 150 }), record(), 149)).toBeDefined();
  // An erasure scrubs the record's content and the events' contents.
  expect(versionAt(A, event({ newContent: null, reason: "erased" }), record({ content: "" }), 150)).toBeUndefined();
  expect(versionAt(A, event({}), undefined, 150)).toBeUndefined();
});
