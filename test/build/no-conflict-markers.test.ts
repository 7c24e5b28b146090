// A merge whose conflicts were not all resolved can be committed with its markers in place: once,
// docs/operations.md landed on main that way (39379ee) and read as garbage in its table. Every
// tracked text file is checked for a line that opens or closes a conflict.
import { expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";

const repo = join(import.meta.dir, "..", "..");
const marker = /^(<{7}|>{7})( |$)/m;

test("no tracked file holds a merge conflict's markers", () => {
  const files = Bun.spawnSync(["git", "ls-files", "-z"], { cwd: repo }).stdout.toString().split("\0").filter(Boolean);
  expect(files.length).toBeGreaterThan(100);
  const conflicted: string[] = [];
  for (const f of files) {
    let text: string;
    try {
      text = readFileSync(join(repo, f), "latin1");
    } catch {
      continue; // listed but not in the work tree (deleted and not yet committed)
    }
    if (text.includes("\0")) continue; // binary
    const m = marker.exec(text);
    if (m) conflicted.push(`${f}:${text.slice(0, m.index).split("\n").length}`);
  }
  expect(conflicted).toEqual([]);
});
