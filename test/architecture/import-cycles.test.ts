// One-way layers: every run-time import of src/ goes down the layer table below (a top-level
// file such as app.ts counts as its own folder), and there is no import cycle between files
// either. Type-only imports are erased at build time and do not count; dynamic imports do. There
// is no list of exceptions.
import { expect, test } from "bun:test";
import { existsSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { sourceFiles, src } from "./source-files";

/** Each file of src/ and the files of src/ it imports at run time. */
function importGraph(): Map<string, Set<string>> {
  const transpiler = new Bun.Transpiler({ loader: "ts" });
  const graph = new Map<string, Set<string>>();
  for (const file of sourceFiles(src)) {
    const deps = new Set<string>();
    for (const { path } of transpiler.scanImports(readFileSync(file, "utf8").replace(/^#!.*/, ""))) {
      if (!path.startsWith(".")) continue;
      let target = resolve(dirname(file), path);
      if (existsSync(`${target}.ts`)) target = `${target}.ts`;
      else if (existsSync(join(target, "index.ts"))) target = join(target, "index.ts");
      if (target.startsWith(`${src}/`) && target.endsWith(".ts")) deps.add(relative(src, target));
    }
    graph.set(relative(src, file), deps);
  }
  return graph;
}

/** The strongly connected components of more than one node (Tarjan), each sorted. */
export function cycles(graph: Map<string, Set<string>>): string[][] {
  let next = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (v: string) => {
    index.set(v, next);
    low.set(v, next++);
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) === index.get(v)) {
      const component: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        component.push(w);
      } while (w !== v);
      if (component.length > 1) found.push(component.sort());
    }
  };
  for (const v of graph.keys()) if (!index.has(v)) visit(v);
  return found.sort((a, b) => a[0].localeCompare(b[0]));
}

/** The folder graph: a file's folder is its top-level folder of src/ (or the file itself at the top). */
export function folderGraph(graph: Map<string, Set<string>>): Map<string, Set<string>> {
  const folder = (f: string) => f.split("/")[0];
  const out = new Map<string, Set<string>>();
  for (const [file, deps] of graph) {
    const from = folder(file);
    if (!out.has(from)) out.set(from, new Set());
    for (const d of deps) if (folder(d) !== from) out.get(from)!.add(folder(d));
  }
  return out;
}

const graph = importGraph();

test("the import graph is read: the server reaches every feature folder", () => {
  const folders = folderGraph(graph);
  expect([...folders.get("app.ts")!]).toEqual(expect.arrayContaining(["audit", "http", "keys", "memory", "search"]));
  expect(graph.size).toBeGreaterThan(80);
});

test("cycle finding: a file cycle and a folder cycle are found, a chain is not", () => {
  const g = new Map([
    ["a/x.ts", new Set(["b/y.ts"])],
    ["b/y.ts", new Set(["a/z.ts"])],
    ["a/z.ts", new Set<string>()],
    ["c/p.ts", new Set(["c/q.ts"])],
    ["c/q.ts", new Set(["c/p.ts"])],
  ]);
  expect(cycles(g)).toEqual([["c/p.ts", "c/q.ts"]]);
  expect(cycles(folderGraph(g))).toEqual([["a", "b"]]);
});

/**
 * The layers of src/, lowest first: a folder imports (at run time) only folders of lower layers,
 * never one of its own layer or above. docs/storage-layout.md (Layers) says the same in words.
 */
export const layers: string[][] = [
  ["text", "config", "log.ts", "build-info.ts", "native-addon.ts", "thread-priority.ts", "core.ts"],
  ["wire"], // error catalogue, times and field shapes on the wire
  ["index"], // the search engine: documents, terms, vectors and scores
  ["storage"],
  ["http", "keys", "embedding", "ops"], // the request pipeline takes the keys' authenticator
  ["audit", "browse"],
  ["memory"],
  ["search"],
  ["context", "extraction", "transfer", "mem0", "ui", "webhooks", "revert"],
  ["consolidate"], // may ask the configured model (extraction's settings)
  ["mcp"],
  ["app.ts"],
  ["server.ts"],
  ["main.ts"],
];

/** The imports of a folder graph that do not go down the layers (or name a folder not in them). */
export function upwardImports(folders: Map<string, Set<string>>, table: string[][]): string[] {
  const rank = new Map(table.flatMap((group, i) => group.map((f) => [f, i] as const)));
  const wrong: string[] = [];
  for (const [from, deps] of folders) {
    const own = rank.get(from);
    if (own === undefined) wrong.push(`${from} is in no layer`);
    else for (const to of deps) if (!((rank.get(to) ?? Infinity) < own)) wrong.push(`${from} → ${to}`);
  }
  return wrong.sort();
}

test("layer check: an import up or across a layer is found, one down is not", () => {
  const g = new Map([
    ["a", new Set(["b"])],
    ["b", new Set(["c"])],
    ["c", new Set<string>()],
    ["d", new Set(["c"])],
  ]);
  expect(upwardImports(g, [["a"], ["b"], ["c"], ["d"]])).toEqual(["a → b", "b → c"]);
  expect(upwardImports(g, [["c", "d"], ["b"], ["a"]])).toEqual(["d → c"]);
  expect(upwardImports(g, [["c"], ["b"], ["a"]])).toEqual(["d is in no layer"]);
});

test("every import of src/ goes down the layers", () => {
  expect(upwardImports(folderGraph(graph), layers)).toEqual([]);
});

test("keys imports neither the request pipeline nor a feature", () => {
  expect([...folderGraph(graph).get("keys")!].sort()).toEqual(["config", "storage", "wire"]);
});

test("no feature asks which backend it has: storageSite and the roles decide (src/storage/index.ts)", () => {
  // Outside storage/ and config/, reading the database URL or the backend's name, opening a
  // backend by name, or importing a backend's files would be a branch on the backend. Comments
  // and types are dropped first (the transpiler's output is what runs).
  const transpiler = new Bun.Transpiler({ loader: "ts" });
  const asks = /(?<!\.)\.(databaseUrl|backend)\b|\bopenLmdb\b|\bopenPostgres\b/;
  const outside = [...graph.keys()].filter((f) => !f.startsWith("storage/") && !f.startsWith("config/"));
  const found = outside.filter(
    (f) =>
      asks.test(transpiler.transformSync(readFileSync(join(src, f), "utf8").replace(/^#!.*/, ""))) ||
      [...graph.get(f)!].some((d) => /^storage\/(lmdb|postgres)\//.test(d)),
  );
  expect(found).toEqual([]);
});

test("no import cycle between folders of src/", () => {
  expect(cycles(folderGraph(graph))).toEqual([]);
});

test("no import cycle between files of src/, the storage backends' included", () => {
  expect(cycles(graph)).toEqual([]);
});

/**
 * The same graph with type-only imports included (`import type`, `export type … from`): erased at
 * build time, but a type cycle between folders is a layering knot all the same (a lower folder
 * that names a higher one's types cannot be read or moved without it).
 */
export function typeAndRunTimeGraph(): Map<string, Set<string>> {
  const graph = new Map<string, Set<string>>();
  for (const file of sourceFiles(src)) {
    const deps = new Set<string>();
    for (const m of readFileSync(file, "utf8").matchAll(/\b(?:from|import)\s*\(?\s*"(\.[^"]*)"/g)) {
      const target = resolve(dirname(file), m[1]);
      const found = [`${target}.ts`, join(target, "index.ts")].find((f) => existsSync(f));
      if (found?.startsWith(`${src}/`)) deps.add(relative(src, found));
    }
    graph.set(relative(src, file), deps);
  }
  return graph;
}

test("the type-inclusive graph sees type-only imports", () => {
  expect([...typeAndRunTimeGraph().get("core.ts")!]).toContain("storage/storage.ts");
  expect(graph.get("core.ts")!.size).toBe(0);
});

test("no import cycle between folders or files of src/, type-only imports included", () => {
  const all = typeAndRunTimeGraph();
  expect(cycles(folderGraph(all))).toEqual([]);
  expect(cycles(all)).toEqual([]);
});

test("no file of src/ imports its own folder's index.ts (the routes import the service, not the reverse)", () => {
  const own = [...typeAndRunTimeGraph()].flatMap(([file, deps]) =>
    [...deps]
      .filter((d) => d !== file && d.endsWith("/index.ts") && dirname(d) === dirname(file))
      .map((d) => `${file} → ${d}`),
  );
  expect(own).toEqual([]);
});

test("the search engine knows documents, terms, vectors and scores: src/index/ names no memory, namespace or request (type-only imports included)", () => {
  const all = typeAndRunTimeGraph();
  const outside = [...all]
    .filter(([file]) => file.startsWith("index/"))
    .flatMap(([file, deps]) =>
      [...deps].filter((d) => !/^(index|text)\//.test(d) && d !== "wire/schemas.ts").map((d) => `${file} → ${d}`),
    );
  expect(outside).toEqual([]);
  expect([...all.keys()].filter((f) => f.startsWith("index/")).length).toBeGreaterThan(10);
});

test("each backend uses the search engine through its small interface: src/index/keyword/index.ts and src/index/vector/index.ts", () => {
  const entries = new Set(["index/keyword/index.ts", "index/vector/index.ts"]);
  // The WebAssembly encoders are bytes, not the engine: the built-in embedder's kernel
  // (embedding/mean-kernel.ts) builds its module with them too.
  const encoders = "index/vector/wasm.ts";
  const inside = [...typeAndRunTimeGraph()]
    .filter(([file]) => !file.startsWith("index/"))
    .flatMap(([file, deps]) =>
      [...deps].filter((d) => d.startsWith("index/") && !entries.has(d) && d !== encoders).map((d) => `${file} → ${d}`),
    );
  expect(inside).toEqual([]);
  const users = [...graph].filter(([, deps]) => [...deps].some((d) => entries.has(d))).map(([file]) => file);
  expect(users).toEqual(
    expect.arrayContaining([
      "storage/lmdb/keyword-cache.ts",
      "storage/postgres/keyword-cache.ts",
      "storage/lmdb/vector-cache.ts",
      "storage/postgres/vector-cache.ts",
    ]),
  );
});

/** client/src's files and the files of client/src each imports, type-only imports included (`./x.js` is x.ts). */
export function clientGraph(dir = resolve(src, "../client/src")): Map<string, Set<string>> {
  const graph = new Map<string, Set<string>>();
  for (const file of sourceFiles(dir)) {
    const deps = new Set<string>();
    for (const m of readFileSync(file, "utf8").matchAll(/\b(?:from|import)\s*\(?\s*"(\.[^"]*)"/g)) {
      const target = resolve(dirname(file), m[1]).replace(/\.js$/, "");
      const found = [`${target}.ts`, join(target, "index.ts")].find((f) => existsSync(f));
      if (found) deps.add(relative(dir, found));
    }
    graph.set(relative(dir, file), deps);
  }
  return graph;
}

test("no import cycle between files of the client (client/src), type-only imports included", () => {
  const graph = clientGraph();
  expect([...graph.get("index.ts")!].sort()).toEqual(["client.ts", "tools.ts", "types.gen.ts", "webhooks.ts"]);
  expect(graph.get("tools.ts")!.size).toBeGreaterThan(0);
  expect(cycles(graph)).toEqual([]);
  expect([...graph].filter(([, deps]) => deps.has("index.ts")).map(([f]) => f)).toEqual([]);
});
