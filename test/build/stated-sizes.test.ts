// @targets binary
// The sizes the manual states match the build: the binary's in README.md and docs/operations.md
// ("about N MiB"), the page script's in docs/ui.md ("about N KB (M KB gzipped)"). A figure further
// off than the tolerance fails with the measured one, so the sentence is updated with the change
// that moved it: 4% for the binary (about 5 MiB; a commit moves it by a few hundred KB), 15% for
// the script, 1 KB for its gzipped size.
import { expect, test } from "bun:test";
import { readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { buildPageScript } from "../../src/ui/bundle";

const repo = join(import.meta.dir, "..", "..");
const page = (name: string) => readFileSync(join(repo, name), "utf8");

/** Whether `actual` is within `share` of the stated figure. */
const near = (stated: number, actual: number, share: number) => Math.abs(actual - stated) <= stated * share;

test.each(["README.md", "docs/operations.md"])("%s states dist/memd's size", (name) => {
  const bin = process.env.MEMD_TEST_BINARY;
  if (!bin) throw new Error("MEMD_TEST_BINARY is not set: run on the binary target, after make build");
  const stated = /`dist\/memd`: one file \(about (\d+) MiB/.exec(page(name));
  expect(stated).not.toBeNull();
  const mib = statSync(bin).size / 1048576;
  expect({
    name,
    stated: Number(stated![1]),
    built: Math.round(mib),
    near: near(Number(stated![1]), mib, 0.04),
  }).toEqual({
    name,
    stated: Number(stated![1]),
    built: Math.round(mib),
    near: true,
  });
});

test("docs/ui.md states the page script's size, and gzipped", async () => {
  const stated = /Its script is about (\d+) KB \((\d+) KB gzipped\)/.exec(page("docs/ui.md"));
  expect(stated).not.toBeNull();
  const script = await buildPageScript();
  const kb = Buffer.byteLength(script) / 1000;
  const gz = Bun.gzipSync(script).length / 1000;
  const [plain, zipped] = [Number(stated![1]), Number(stated![2])];
  expect({ plain, built: Math.round(kb), near: near(plain, kb, 0.15) }).toEqual({
    plain,
    built: Math.round(kb),
    near: true,
  });
  // A few KB: a share would be less than the rounding of the figure itself.
  expect({ zipped, built: Math.round(gz), near: Math.abs(gz - zipped) <= 1 }).toEqual({
    zipped,
    built: Math.round(gz),
    near: true,
  });
});
