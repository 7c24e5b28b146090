// @targets lmdb
// Keyword snapshots (src/storage/lmdb/keyword-snapshot.ts): a namespace's lists saved beside the
// store are read back on the next first search, caught up from the audit trail, and answer
// exactly as lists rebuilt from the records: after a clean close, after a kill -9 in the middle
// of writes (a child process), after a rebuild of the index (the snapshot is refused), and a
// damaged file is ignored.
import { afterAll, expect, test } from "bun:test";
import { mkdirSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { openLmdb } from "../../src/storage/lmdb/index";
import { snapshotStats } from "../../src/storage/lmdb/keyword-cache";
import { dropSnapshots, snapshotDir } from "../../src/storage/lmdb/keyword-snapshot";
import type { MemoryOp } from "../../src/storage/storage";
import { queryTerms } from "../../src/text/tokens";
import { seededRandom, tempDir } from "../helpers";

const dirs: { cleanup: () => void }[] = [];
afterAll(() => {
  for (const d of dirs) d.cleanup();
});
const vocab = "tea coffee cafe dog cat lisbon paris nurse piano runs daily vegan meat sails boat red blue green".split(
  " ",
);
const queries = ["tea", "dog cat", "paris piano", "red blue green", "vegan meat daily", "boat"];
const ns = "snap";

/** Every query's answer (ids and scores, rounded) over the namespace and one entity. */
async function answers(s: Awaited<ReturnType<typeof openLmdb>>) {
  const out: string[] = [];
  for (const q of queries)
    for (const entity of [undefined, "e1"]) {
      const hits = await s.keywordSearch({ namespace: ns, entity }, queryTerms(q), {}, 20);
      out.push(hits.map((h) => `${h.memory.id}:${h.score.toFixed(9)}`).join(" "));
    }
  return out;
}

/** The answers of lists rebuilt from the records (no snapshot). */
async function rebuilt(dir: string) {
  dropSnapshots(dir);
  const s = await openLmdb(dir);
  try {
    return await answers(s);
  } finally {
    await s.close();
  }
}

const waitFor = async (ok: () => boolean) => {
  for (let i = 0; i < 500 && !ok(); i++) await Bun.sleep(10);
  expect(ok()).toBe(true);
};

function ops(rand: () => number, n: number, ids: string[]): MemoryOp[] {
  const out: MemoryOp[] = [];
  for (let i = 0; i < n; i++) {
    const content = Array.from(
      { length: 2 + Math.floor(rand() * 5) },
      () => vocab[Math.floor(rand() * vocab.length)],
    ).join(" ");
    const x = rand();
    if (x < 0.6 || ids.length < 5) {
      const id = Bun.randomUUIDv7();
      ids.push(id);
      out.push({
        event: "ADD",
        create: { id, namespace: ns, entity: `e${Math.floor(rand() * 3)}`, content, category: "fact", importance: 0.5 },
      });
    } else if (x < 0.75) {
      const [id] = ids.splice(Math.floor(rand() * ids.length), 1);
      out.push({ event: "DELETE", target: id, reason: "test" });
    } else out.push({ event: "MERGE", target: ids[Math.floor(rand() * ids.length)], patch: { content } });
  }
  return out;
}

test("after a clean close the next first search reads the snapshot and answers as rebuilt lists do", async () => {
  const tmp = tempDir();
  dirs.push(tmp);
  const rand = seededRandom(5);
  const ids: string[] = [];
  let s = await openLmdb(tmp.dir);
  await s.apply(ops(rand, 400, ids), null);
  // What a save cut short by a crash leaves: removed by the next save.
  mkdirSync(snapshotDir(tmp.dir), { recursive: true });
  writeFileSync(join(snapshotDir(tmp.dir), "keywords-0.bin.999999.tmp"), "tea coffee");
  await s.keywordSearch({ namespace: ns }, queryTerms("tea"), {}, 5); // builds the lists; a snapshot follows behind
  await waitFor(() => readdirSync(snapshotDir(tmp.dir)).filter((f) => f.endsWith(".bin")).length === 1);
  expect(readdirSync(snapshotDir(tmp.dir)).filter((f) => f.endsWith(".tmp"))).toEqual([]);
  for (const op of ops(rand, 200, ids)) await s.apply([op], null); // followed by the lists, saved at close
  await s.close();
  const restored = snapshotStats.restored;
  s = await openLmdb(tmp.dir);
  const got = await answers(s);
  expect(snapshotStats.restored).toBe(restored + 1);
  await s.close();
  expect(got).toEqual(await rebuilt(tmp.dir));
  expect(got.join(" ").length).toBeGreaterThan(1000); // the queries do find things
});

test("after a kill -9 in the middle of writes, the snapshot caught up from the events finds every acknowledged store and nothing deleted", async () => {
  const tmp = tempDir();
  dirs.push(tmp);
  // The child: loads, searches (the snapshot is written), then writes on and is killed.
  const child = Bun.spawn([process.execPath, "run", join(import.meta.dir, "keyword-snapshot-child.ts"), tmp.dir], {
    stdout: "pipe",
    stderr: "inherit",
  });
  const code = await child.exited;
  expect(code).not.toBe(0); // killed
  const out = (await new Response(child.stdout).text()).trim().split("\n");
  expect(out[0]).toBe("snapshot written");
  const acked = out.filter((l) => l.startsWith("acked ")).length;
  expect(acked).toBeGreaterThan(10);
  const restored = snapshotStats.restored;
  const s = await openLmdb(tmp.dir);
  const got = await answers(s);
  expect(snapshotStats.restored).toBe(restored + 1);
  // Every acknowledged store's own word finds it; a deleted memory (or a merged one's old word) never does.
  const last = new Map<string, boolean>();
  for (const line of out) {
    const [what, id, word] = line.split(" ");
    if (what === "acked" || what === "deleted") last.set(`${id} ${word}`, what === "acked");
  }
  for (const [key, found] of last) {
    const [id, word] = key.split(" ");
    const hits = (await s.keywordSearch({ namespace: ns }, queryTerms(word), {}, 5)).map((h) => h.memory.id);
    expect({ key, found: hits.includes(id) }).toEqual({ key, found });
  }
  await s.close();
  expect(got).toEqual(await rebuilt(tmp.dir));
});

test("a snapshot from before a rebuild of the index, or a damaged one, is not used", async () => {
  const tmp = tempDir();
  dirs.push(tmp);
  const rand = seededRandom(9);
  const ids: string[] = [];
  let s = await openLmdb(tmp.dir);
  await s.apply(ops(rand, 300, ids), null);
  await s.keywordSearch({ namespace: ns }, queryTerms("tea"), {}, 5);
  await s.close();
  const [file] = readdirSync(snapshotDir(tmp.dir));
  s = await openLmdb(tmp.dir);
  await s.rebuildSearchIndex();
  const restored = snapshotStats.restored;
  expect((await answers(s)).length).toBe(queries.length * 2);
  expect(snapshotStats.restored).toBe(restored);
  await s.close();
  // Damaged: a byte changed in the middle.
  const path = join(snapshotDir(tmp.dir), file);
  const bytes = await Bun.file(path).bytes();
  bytes[Math.floor(bytes.length / 2)] ^= 0xff;
  writeFileSync(path, bytes);
  s = await openLmdb(tmp.dir);
  const got = await answers(s);
  expect(snapshotStats.restored).toBe(restored);
  await s.close();
  expect(got).toEqual(await rebuilt(tmp.dir));
});
