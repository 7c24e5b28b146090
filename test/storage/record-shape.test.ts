// @targets lmdb
// The record shape is written once (src/storage/records.ts): a field added to MemoryRecord is one
// change. Shown on a copy of src/ with one line added to the schema (an optional `mood`): the copy
// stores it on LMDB and reads it back, answers it (the public Memory schema and toMemory), exports
// it (the line's checker and field order), maps it to a PostgreSQL column and replays it as of an
// earlier instant. (PostgreSQL also needs the migration that adds its column, and an erasure names
// the fields it scrubs: the steps that are not derived.)
import { afterAll, expect, test } from "bun:test";
import { cpSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { eventState, MemoryRecord, memoryExtras } from "../../src/storage/records";
import { tempDir } from "../helpers";

const root = resolve(import.meta.dir, "../..");
const tmp = tempDir("memd-record-shape-");
afterAll(() => tmp.cleanup());

/** What the copy's own code does with a record that has `mood` (printed as JSON by a child process). */
const check = `
import { Memory } from "./src/memory/model";
import { toMemory } from "./src/memory/service";
import { versionAt } from "./src/storage/asof";
import { openLmdb } from "./src/storage/lmdb/index";
import { columns } from "./src/storage/postgres/rows";
import { canonical } from "./src/transfer/service";
import { fieldOrder, lineCheckers } from "./src/transfer/model";
const s = await openLmdb(process.argv[2]);
const id = "00000000-0000-4000-8000-000000000001";
const create = { id, namespace: "n", entity: "e", content: "lives in Paris", category: "fact", importance: 0.5, mood: "calm" };
await s.apply([{ event: "ADD", create }], null);
const stored = (await s.getMemory(id))!;
const events = [];
for await (const r of s.exportAll({ keys: false })) if (r.type === "event") events.push(r);
await s.close();
const line = JSON.parse(canonical({ type: "memory", ...stored }));
console.log(JSON.stringify({
  stored: stored.mood,
  answered: toMemory(stored).mood,
  inPublicSchema: "mood" in Memory.properties,
  exported: line.mood,
  lineValid: lineCheckers.memory.Check(line),
  inFieldOrder: fieldOrder.memory.includes("mood"),
  column: columns.memories.find((c) => c.field === "mood")?.column,
  replayed: versionAt(id, events[0], stored, stored.createdAt)?.mood,
}));
`;

test("a field added to MemoryRecord (one line in records.ts) is stored, answered, exported, mapped to a column and replayed", () => {
  expect("mood" in MemoryRecord.properties).toBe(false); // (the copy adds it)
  expect(memoryExtras).toEqual(["tags", "metadata", "source", "key"]);
  expect(eventState.every((f) => f in MemoryRecord.properties)).toBe(true);
  cpSync(join(root, "src"), join(tmp.dir, "src"), { recursive: true });
  for (const f of ["node_modules", "package.json"]) symlinkSync(join(root, f), join(tmp.dir, f));
  const records = join(tmp.dir, "src/storage/records.ts");
  const text = readFileSync(records, "utf8");
  const anchor = "  source: Type.Optional(Type.String({ maxLength: limits.sourceChars })),\n";
  expect(text).toContain(anchor);
  writeFileSync(records, text.replace(anchor, `${anchor}  mood: Type.Optional(Type.String()),\n`));
  writeFileSync(join(tmp.dir, "check.ts"), check);
  const run = Bun.spawnSync([process.execPath, join(tmp.dir, "check.ts"), join(tmp.dir, "data")], {
    cwd: tmp.dir,
    env: { ...process.env, MEMD_LOG_LEVEL: "warn" },
  });
  expect(run.stderr.toString()).toBe("");
  expect(JSON.parse(run.stdout.toString().trim().split("\n").pop()!)).toEqual({
    stored: "calm",
    answered: "calm",
    inPublicSchema: true,
    exported: "calm",
    lineValid: true,
    inFieldOrder: true,
    column: "mood",
    replayed: "calm",
  });
});
