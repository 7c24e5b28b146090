// @targets lmdb binary
// No stale first search after a bulk load cut by kill -9 (issue 32), from outside: raw stores over
// HTTP into a namespace never searched, past --keyword-prebuild, so the server follows it and
// saves its keyword snapshot once the stores pause; then more stores, and the server is killed
// (SIGKILL) in the middle of them. The next start's first search reads that snapshot (now behind
// by hundreds of stores) and catches up: every acknowledged store is found by its own word.
import { afterAll, expect, test } from "bun:test";
import { existsSync, readdirSync } from "node:fs";
import { snapshotDir } from "../../src/storage/lmdb/keyword-snapshot";
import { call as callUrl } from "../binary-helpers";
import { metricIn, rootSecret, type ServerProcess, spawnServer, tempDir } from "../helpers";

const tmp = tempDir("memd-bulk-kill-");
const started: ServerProcess[] = [];
afterAll(async () => {
  // (A server still running when an expectation failed.)
  for (const s of started) s.proc.kill("SIGKILL");
  await Promise.all(started.map((s) => s.proc.exited));
  tmp.cleanup();
});
const env = { MEMD_API_KEY: rootSecret, MEMD_EMBEDDER: "none" };
const start = async () => {
  const s = await spawnServer(["--data-dir", tmp.dir, "--keyword-prebuild", "200"], env);
  started.push(s);
  return s;
};
const words = "tea coffee bike lisbon paris dog cat garden music piano violin running book film".split(" ");

const call = (url: string, method: string, path: string, body?: unknown) =>
  callUrl(url, rootSecret, method, path, body);
const metric = async (url: string, name: string) => metricIn((await call(url, "GET", "/metrics")).body, name);

test("kill -9 in the middle of a bulk load: the next first search reads the older snapshot, caught up, and finds every acknowledged store", async () => {
  const acked: string[] = [];
  let next = 0;
  /** Raw stores, 16 in flight, until `until()` holds; each acknowledged one's word recorded. */
  const load = (url: string, until: () => boolean) =>
    Promise.all(
      Array.from({ length: 16 }, async () => {
        while (!until()) {
          const i = next++;
          const word = `uq${i.toString(36)}x`;
          const content = `${words[i % words.length]} ${words[(i * 7) % words.length]} ${word}`;
          try {
            const r = await call(url, "POST", "/v1/memory", {
              namespace: "bulk",
              entity: `e${i % 5}`,
              content,
              infer: false,
            });
            if (r.status === 200) acked.push(word);
          } catch {
            return; // the server is gone
          }
        }
      }),
    );

  const a = await start();
  await load(a.url, () => next >= 400);
  // Followed past the threshold and saved once the stores paused (about a second), unsearched.
  const saved = () =>
    existsSync(snapshotDir(tmp.dir)) && readdirSync(snapshotDir(tmp.dir)).some((f) => f.endsWith(".bin"));
  for (let i = 0; i < 600 && !saved(); i++) await Bun.sleep(50);
  expect(saved()).toBe(true);
  expect(acked.length).toBe(400);
  // More stores; killed once 600 more were acknowledged, others in flight.
  let killed = false;
  await load(a.url, () => {
    if (!killed && acked.length >= 1000) {
      killed = true;
      a.proc.kill("SIGKILL");
    }
    return killed;
  });
  await a.proc.exited;
  expect(acked.length).toBeGreaterThanOrEqual(1000);

  const b = await start();
  try {
    for (const word of acked) {
      const r = (
        await call(b.url, "POST", "/v1/memory/search", { namespace: "bulk", query: word, mode: "keyword", limit: 3 })
      ).body;
      expect({ word, found: r.results.some((h: { content: string }) => h.content.endsWith(` ${word}`)) }).toEqual({
        word,
        found: true,
      });
    }
    // From the snapshot (caught up from the audit trail), not rebuilt from the records.
    expect(await metric(b.url, "memd_keyword_lists_restored_total")).toBe(1);
    expect(await metric(b.url, "memd_keyword_lists_built_total")).toBe(0);
    const count = (await call(b.url, "GET", "/v1/namespaces")).body.namespaces[0].memories;
    expect(count).toBeGreaterThanOrEqual(acked.length);
  } finally {
    b.proc.kill("SIGTERM");
    await b.proc.exited;
  }
});
