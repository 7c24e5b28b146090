// The manual's links: every relative link and image of README.md, CHANGELOG.md and docs/*.md
// resolves inside the repository, and every #anchor names a heading of its page (GitHub's slugs).
import { expect, test } from "bun:test";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, relative, resolve } from "node:path";

const root = resolve(import.meta.dir, "../..");
const pages = [
  "README.md",
  "CHANGELOG.md",
  ...readdirSync(`${root}/docs`)
    .filter((f) => f.endsWith(".md"))
    .map((f) => `docs/${f}`),
];

/** The text outside fenced code blocks. */
const prose = (text: string) => text.replace(/^([ \t]*)(`{3,}|~{3,})[^\n]*\n[\s\S]*?\n\1\2[ \t]*$/gm, "");

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens; repeats get -1, -2. */
export function anchors(text: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  for (const m of prose(text).matchAll(/^#{1,6}\s+(.+?)\s*#*\s*$/gm)) {
    const base = m[1]
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, "")
      .replace(/\s/g, "-");
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n === 0 ? base : `${base}-${n}`);
  }
  return out;
}

test("GitHub's anchors: punctuation and code marks go, spaces become hyphens", () => {
  expect([
    ...anchors("## Safe retries: `Idempotency-Key`\n## Browsing: `GET /v1/namespaces`, `GET /v1/me`\n## A\n## A"),
  ]).toEqual(["safe-retries-idempotency-key", "browsing-get-v1namespaces-get-v1me", "a", "a-1"]);
});

test.each(pages)("every relative link of %s resolves, anchors included", (page) => {
  // Outside code: fenced blocks and `inline code` hold no links.
  const text = prose(readFileSync(`${root}/${page}`, "utf8")).replace(/`[^`\n]*`/g, "");
  const targets = [
    ...[...text.matchAll(/\]\(([^)\s]+)\)/g)].map((m) => m[1]),
    ...[...text.matchAll(/\ssrc="([^"]+)"/g)].map((m) => m[1]),
  ].filter((l) => !/^[a-z]+:/i.test(l));
  for (const link of targets) {
    const [file, anchor] = link.split("#");
    const path = file ? resolve(root, dirname(page), file) : resolve(root, page);
    expect(`${link}: ${relative(root, path).startsWith("..") ? "outside" : "inside"}`).toBe(`${link}: inside`);
    expect(`${link}: ${existsSync(path) ? "exists" : "missing"}`).toBe(`${link}: exists`);
    if (anchor && path.endsWith(".md"))
      expect(`${link}: ${anchors(readFileSync(path, "utf8")).has(anchor) ? "found" : "no such heading"}`).toBe(
        `${link}: found`,
      );
  }
});
