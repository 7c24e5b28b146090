// @targets lmdb
// Each storage backend is one folder with the same file per role (lmdb/events.ts beside
// postgres/events.ts, ...), assembled by a short index.ts around an explicit state object: no
// file of a backend imports its own folder's index.ts, and no import circle exists inside
// src/storage, type-only imports included (which the import-cycle test over all of src/ leaves
// out, as they are erased at build time).
import { expect, test } from "bun:test";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";

const storage = resolve(import.meta.dir, "../../src/storage");
const backends = ["lmdb", "postgres"];
/** The role files, one per role interface of storage.ts (memories.ts holds MemoryWrites and MemoryReads). */
const roleFiles = [
  "memories.ts",
  "events.ts",
  "asof.ts",
  "browse.ts",
  "search.ts",
  "embeddings.ts",
  "keys.ts",
  "erasure.ts",
  "transfer.ts",
  "idempotency.ts",
  "upkeep.ts",
];

function files(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? files(join(dir, e.name)) : e.name.endsWith(".ts") ? [join(dir, e.name)] : [],
  );
}

/** Each file of src/storage and the files of src/storage it imports, type-only imports included. */
function imports(): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  for (const file of files(storage)) {
    const deps: string[] = [];
    for (const m of readFileSync(file, "utf8").matchAll(/\b(?:from|import)\s*\(?\s*"(\.[^"]*)"/g)) {
      const target = resolve(dirname(file), m[1]);
      const found = [`${target}.ts`, join(target, "index.ts")].find((f) => existsSync(f));
      if (found?.startsWith(`${storage}/`)) deps.push(relative(storage, found));
    }
    graph.set(relative(storage, file), deps);
  }
  return graph;
}

/** Files that reach themselves again through their imports. */
function onCycles(graph: Map<string, string[]>): string[] {
  const reaches = (from: string, to: string, seen = new Set<string>()): boolean =>
    (graph.get(from) ?? []).some((d) => d === to || (!seen.has(d) && seen.add(d) && reaches(d, to, seen)));
  return [...graph.keys()].filter((f) => reaches(f, f)).sort();
}

test("cycle finding: a circle through a type-only import is found, a chain is not", () => {
  const g = new Map([
    ["a.ts", ["b.ts"]],
    ["b.ts", ["c.ts"]],
    ["c.ts", ["a.ts"]],
    ["d.ts", ["a.ts"]],
  ]);
  expect(onCycles(g)).toEqual(["a.ts", "b.ts", "c.ts"]);
  const graph = imports();
  // lmdb/index-writer.ts imports staging.ts only for its type: the scan sees it.
  expect(graph.get("lmdb/index-writer.ts")).toContain("lmdb/staging.ts");
});

test("every backend has the same file per role, and an index.ts", () => {
  for (const b of backends)
    for (const f of [...roleFiles, "index.ts", "state.ts"])
      expect(`${b}/${f}: ${existsSync(join(storage, b, f))}`).toBe(`${b}/${f}: true`);
});

test("no file of a backend imports its own folder's index.ts", () => {
  const offenders = [...imports()].filter(([file, deps]) => {
    const folder = file.split("/")[0];
    return backends.includes(folder) && deps.includes(`${folder}/index.ts`);
  });
  expect(offenders.map(([f]) => f)).toEqual([]);
});

test("no import circle inside src/storage, type-only imports included", () => {
  expect(onCycles(imports())).toEqual([]);
});
