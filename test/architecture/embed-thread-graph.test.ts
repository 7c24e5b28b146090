// The built-in embedder's thread (a Worker: src/embedding/embed-thread.ts) runs in a VM of its own,
// which loads, and compiles once hot, every module it imports: its graph stays what it runs (the
// embedder, the LMDB queue's reads and vector writes), not the storage layer's every backend, the
// search engine, or the keyword lists' languages (1.25 MB of JavaScript when it imported
// storage/index.ts; 0.13 MB since).
import { expect, test } from "bun:test";
import { existsSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { src } from "./source-files";

/** The files of src/ that `entry` reaches by run-time imports, and the packages they import. */
function reach(entry: string): { files: Set<string>; packages: Set<string> } {
  const transpiler = new Bun.Transpiler({ loader: "ts" });
  const files = new Set<string>();
  const packages = new Set<string>();
  const visit = (file: string) => {
    const name = relative(src, file);
    if (files.has(name)) return;
    files.add(name);
    for (const { path } of transpiler.scanImports(readFileSync(file, "utf8"))) {
      if (!path.startsWith(".")) {
        packages.add(path);
        continue;
      }
      let target = resolve(dirname(file), path);
      if (existsSync(`${target}.ts`)) target = `${target}.ts`;
      else if (existsSync(join(target, "index.ts"))) target = join(target, "index.ts");
      if (target.endsWith(".ts")) visit(target);
    }
  };
  visit(join(src, entry));
  return { files, packages };
}

test("the embedding thread imports only what it runs", () => {
  const { files, packages } = reach("embedding/embed-thread.ts");
  // (Read: the thread's writes and its embedder are there.)
  expect(files).toContain("storage/lmdb/vectors-elsewhere.ts");
  expect(files).toContain("embedding/static-embedder.ts");
  const heavy = [...files].filter((f) =>
    /^(storage\/index\.ts|storage\/postgres\/|storage\/lmdb\/search\.ts|index\/keyword\/|text\/|http\/|memory\/)/.test(
      f,
    ),
  );
  expect(heavy).toEqual([]);
  expect([...packages].filter((p) => /^(snowball-stemmers|stopwords-iso|elysia|ai|@ai-sdk\/)/.test(p))).toEqual([]);
});
