// One place checks a key's namespace scope: src/keys/ (auth.ts: the `namespace` and `memory`
// route macros, checkScope, visibleMemory). No other file of src/ calls the scope rules
// themselves (covers, coversPattern, coversKey, requireNamespace) or imports them, so a handler
// cannot grow a check of its own by hand again: a route declares where its namespace comes from.
import { expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { relative } from "node:path";
import { sourceFiles, src } from "./source-files";

const rules = ["covers", "coversPattern", "coversKey", "requireNamespace"];
const call = new RegExp(`\\b(${rules.join("|")})\\s*\\(`);
const importOf = new RegExp(
  `import\\s*\\{[^}]*\\b(${rules.join("|")})\\b[^}]*\\}\\s*from\\s*["'][^"']*keys/service["']`,
);

test("no file of src/ outside keys/ checks a key's scope by hand", () => {
  // Comments and types are gone from the transpiled text, so only code counts.
  const transpiler = new Bun.Transpiler({ loader: "ts" });
  const found: string[] = [];
  for (const file of sourceFiles(src)) {
    const name = relative(src, file);
    if (name.startsWith("keys/")) continue;
    const text = readFileSync(file, "utf8").replace(/^#!.*/, "");
    const code = transpiler.transformSync(text);
    const m = call.exec(code) ?? importOf.exec(text);
    if (m) found.push(`${name}: ${m[1]}`);
  }
  expect(found).toEqual([]);
});

test("the check finds a hand check (it is not vacuous)", () => {
  const transpiler = new Bun.Transpiler({ loader: "ts" });
  const handler = `import { covers } from "../keys/service";
export const f = (k: any, r: any) => { if (!covers(k, r.namespace)) throw new Error("no"); };`;
  expect(call.exec(transpiler.transformSync(handler))?.[1]).toBe("covers");
  expect(importOf.exec(handler)?.[1]).toBe("covers");
});
