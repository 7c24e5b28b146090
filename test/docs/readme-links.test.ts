// The manual's links: every relative link of the README resolves inside the repository.
import { expect, test } from "bun:test";
import { existsSync, readFileSync } from "node:fs";
import { relative, resolve } from "node:path";

test("every relative link in the README resolves inside the repository", () => {
  const root = resolve(import.meta.dir, "../..");
  const text = readFileSync(`${root}/README.md`, "utf8");
  const links = [...text.matchAll(/\]\(([^)\s]+)\)/g)].map((m) => m[1]).filter((l) => !/^[a-z]+:/i.test(l));
  expect(links.length).toBeGreaterThan(0);
  for (const link of links) {
    const path = resolve(root, link.split("#")[0]);
    expect(relative(root, path).startsWith("..")).toBe(false);
    expect(existsSync(path)).toBe(true);
  }
});
