// @targets lmdb
// Keyword snapshots (src/storage/lmdb/keyword-snapshot.ts): a namespace's lists saved beside the
// store are read back on the next first search, caught up from the audit trail, and answer
// exactly as lists rebuilt from the records: after a clean close, after a kill -9 in the middle
// of writes and of a save (a child process), after a rebuild of the index (the snapshot is
// refused, as one of another format is), and a damaged file is ignored. A save is written a
// piece at a time: writes and searches are answered meanwhile, and it holds the lists as they
// were when it began (a compaction waits for it); lists built from the records are then replaced
// by the ones read back from it. The mapping is private: nothing written into it reaches the file.
import { afterAll, expect, test } from "bun:test";
import { copyFileSync, mkdirSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { KeywordSpace, packing } from "../../src/index/keyword";
import { openLmdb } from "../../src/storage/lmdb/index";
import { snapshotStats, snapshotting } from "../../src/storage/lmdb/keyword-cache";
import { readSnapshot, snapshotDir, snapshotJob, writeSnapshot } from "../../src/storage/lmdb/keyword-snapshot";
import { deferring } from "../../src/storage/lmdb/touched";
import type { MemoryOp } from "../../src/storage/storage";
import { queryTerms } from "../../src/text/tokens";
import { seededRandom, tempDir } from "../helpers";
import { keywordAnswers, queries, rebuiltAnswers, vocab } from "./keyword-answers";

const dirs: { cleanup: () => void }[] = [];
// The namespaces here are small: as lists, not packed (packed ones are not snapshotted).
const upTo = packing.upTo;
packing.upTo = 0;
// Each commit followed at once (not in batches): saves here begin after counts of changes.
const batch = deferring.batch;
deferring.batch = 1;
afterAll(() => {
  packing.upTo = upTo;
  deferring.batch = batch;
  for (const d of dirs) d.cleanup();
});
const ns = "snap";
const answers = (s: Awaited<ReturnType<typeof openLmdb>>) => keywordAnswers(s, ns);
const rebuilt = (dir: string) => rebuiltAnswers(dir, ns);

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

test("lists saved and read back while writes go on, and after a clean close, answer as rebuilt lists do", async () => {
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
  // Followed by the lists; saved again every 20 changes or so (then read back in their place), and at close.
  const reloads = snapshotStats.reloaded;
  const after = snapshotting.after;
  snapshotting.after = 20;
  try {
    for (const op of ops(rand, 200, ids)) await s.apply([op], null);
    await waitFor(() => snapshotStats.reloaded > reloads + 3);
  } finally {
    snapshotting.after = after;
  }
  const live = await answers(s);
  await s.close();
  const restored = snapshotStats.restored;
  s = await openLmdb(tmp.dir);
  const got = await answers(s);
  expect(snapshotStats.restored).toBe(restored + 1);
  await s.close();
  const want = await rebuilt(tmp.dir);
  expect(live).toEqual(want);
  expect(got).toEqual(want);
  expect(got.join(" ").length).toBeGreaterThan(1000); // the queries do find things
});

test("lists built from the records are replaced by the snapshot's and collected (lists read back later are not collected on purpose), and the mapped lists answer exactly after further writes and deletes", async () => {
  const tmp = tempDir();
  dirs.push(tmp);
  const rand = seededRandom(17);
  const ids: string[] = [];
  const s = await openLmdb(tmp.dir);
  const { reloaded, collections } = snapshotStats;
  const { collectAbove, after } = snapshotting;
  snapshotting.collectAbove = 0; // (at 1,000,000 documents: 100,000)
  try {
    await s.apply(ops(rand, 500, ids), null);
    await s.keywordSearch({ namespace: ns }, queryTerms("tea"), {}, 5); // built; saved behind, read back, swapped
    await waitFor(() => snapshotStats.reloaded === reloaded + 1 && snapshotStats.collections === collections + 1);
    // The built lists are unreachable: freed by a collection (the one run after the swap, or the next).
    const built = snapshotStats.replaced!;
    await waitFor(() => {
      Bun.gc(true);
      return built.deref() === undefined;
    });
    // The lists now view the file: adds, deletes and merges go on in them, exactly.
    for (const op of ops(rand, 300, ids)) await s.apply([op], null);
    expect(snapshotStats.reloaded).toBe(reloaded + 1); // (not saved again: under snapshotting.after changes)
    // Saved again, and read back in place of the mapped lists: those are not collected on purpose
    // (they hold little of the heap).
    snapshotting.after = 20;
    for (const op of ops(rand, 100, ids)) await s.apply([op], null);
    await waitFor(() => snapshotStats.reloaded >= reloaded + 2);
    expect(snapshotStats.collections).toBe(collections + 1);
    const live = await answers(s);
    await s.close();
    expect(live).toEqual(await rebuilt(tmp.dir));
    expect(live.join(" ").length).toBeGreaterThan(1000);
  } finally {
    snapshotting.collectAbove = collectAbove;
    snapshotting.after = after;
  }
});

test("after a kill -9 in the middle of writes and of a save, the snapshot caught up from the events finds every acknowledged store and nothing deleted", async () => {
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
  // A second save was under way (its pieces waiting) when it was killed: its temporary file is left, unused.
  expect(out).toContain("second save under way");
  expect(readdirSync(snapshotDir(tmp.dir)).filter((f) => f.endsWith(".tmp")).length).toBe(1);
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

test("a snapshot from before a rebuild of the index, of another format, or a damaged one, is not used", async () => {
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
  const path = join(snapshotDir(tmp.dir), file);
  const bytes = await Bun.file(path).bytes();
  // Of another format (the header's magic of an older one, memd-keywords-7 without the spare
  // room): not used, rebuilt once.
  const older = bytes.slice();
  const magic = Buffer.from(bytes).indexOf("memd-keywords-") + "memd-keywords-".length;
  older[magic] = older[magic] === 0x37 ? 0x36 : 0x37;
  writeFileSync(path, older);
  s = await openLmdb(tmp.dir);
  const fromOlder = await answers(s);
  expect(snapshotStats.restored).toBe(restored);
  await s.close();
  // Damaged: a byte changed in the last section (the id table). (Not in the per-document
  // sections' spare room, which is not hashed: what is there is written over before it is read.)
  bytes[bytes.length - 3] ^= 0xff;
  writeFileSync(path, bytes);
  s = await openLmdb(tmp.dir);
  const got = await answers(s);
  expect(snapshotStats.restored).toBe(restored);
  await s.close();
  const want = await rebuilt(tmp.dir);
  expect(got).toEqual(want);
  expect(fromOlder).toEqual(want);
});

test("a save is written a piece at a time: writes and searches are answered meanwhile, and the snapshot (as of its start) is caught up exactly", async () => {
  const tmp = tempDir();
  dirs.push(tmp);
  const rand = seededRandom(11);
  const ids: string[] = [];
  const s = await openLmdb(tmp.dir);
  await s.apply(ops(rand, 400, ids), null);
  const pace = { turnMs: snapshotting.turnMs, between: snapshotting.between };
  let waiting = 0;
  let go = () => {};
  // Every piece waits for the test.
  snapshotting.turnMs = 0;
  snapshotting.between = () => {
    waiting++;
    return new Promise((resolve) => {
      go = () => resolve(undefined);
    });
  };
  const bins = () => readdirSync(snapshotDir(tmp.dir)).filter((f) => f.endsWith(".bin"));
  let during: string[];
  const reloads = snapshotStats.reloaded;
  try {
    await s.keywordSearch({ namespace: ns }, queryTerms("tea"), {}, 5); // builds the lists; the save begins behind
    await waitFor(() => waiting === 1);
    expect(bins()).toEqual([]);
    // While it waits: writes, each followed by the lists, and searches of what is current.
    for (const op of ops(rand, 150, ids)) await s.apply([op], null);
    during = await answers(s);
    expect(waiting).toBe(1);
  } finally {
    Object.assign(snapshotting, pace);
    go();
  }
  await waitFor(() => bins().length === 1 && readdirSync(snapshotDir(tmp.dir)).length === 1);
  // The lists built from the records were then read again from that file (mapped) and caught up:
  // they answer as before.
  await waitFor(() => snapshotStats.reloaded === reloads + 1);
  expect(await answers(s)).toEqual(during);
  // That snapshot (of the lists before the 150 changes) is kept aside; close saves a newer one.
  const file = join(snapshotDir(tmp.dir), bins()[0]);
  copyFileSync(file, `${file}.kept`);
  await s.close();
  copyFileSync(`${file}.kept`, file);
  const restored = snapshotStats.restored;
  const again = await openLmdb(tmp.dir);
  const got = await answers(again);
  expect(snapshotStats.restored).toBe(restored + 1);
  await again.close();
  const rebuiltAnswers = await rebuilt(tmp.dir);
  expect(during).toEqual(rebuiltAnswers);
  expect(got).toEqual(rebuiltAnswers);
});

test("a frozen space's snapshot holds it as it was frozen, whatever changes (and compactions) come while it is written; a space read from it follows changes", async () => {
  const tmp = tempDir();
  dirs.push(tmp);
  const rand = seededRandom(21);
  // Compacts after 5 gone documents (once more than half are gone).
  const space = new KeywordSpace(5);
  const docs = new Map<string, (string | number)[]>();
  const doc = (i: number) => {
    const v: (string | number)[] = [3, i, `e${i % 4}`];
    for (const t of new Set([vocab[Math.floor(rand() * 8)], vocab[Math.floor(rand() * 8)], `only${i}`]))
      v.push(t, 1 + (i % 3));
    return v;
  };
  for (let i = 0; i < 300; i++) {
    const id = Bun.randomUUIDv7();
    docs.set(id, doc(i));
    space.add(id, docs.get(id)!, true);
  }
  for (const id of [...docs.keys()].filter((_, i) => i % 7 === 0)) {
    space.remove(id);
    docs.delete(id);
  }
  const at = new Map(docs);
  const frozen = space.freeze();
  // Between pieces: most documents removed (a compaction would run), others added and changed.
  let step = 0;
  const between = async () => {
    const live = [...docs.keys()];
    for (const id of live.slice(0, 30)) {
      space.remove(id);
      docs.delete(id);
    }
    for (let i = 0; i < 5; i++) {
      const id = live[30 + i] ?? Bun.randomUUIDv7();
      docs.set(id, doc(1000 + step * 10 + i));
      space.add(id, docs.get(id)!);
    }
    step++;
  };
  const job = snapshotJob(tmp.dir, ns);
  const stamp = { format: 1, clockEpoch: 0, searchEpoch: 0 };
  expect(await writeSnapshot(tmp.dir, ns, { ...stamp, atMs: 7, atSeq: 9 }, frozen, job, { turnMs: 0, between })).toBe(
    true,
  );
  frozen.release();
  expect(step).toBeGreaterThan(5);
  const read = readSnapshot(tmp.dir, ns, stamp)!;
  expect(read.at).toEqual({ atMs: 7, atSeq: 9 });
  const back = KeywordSpace.fromParts(read.parts);
  // Every document live when frozen, with its terms and tfs, and nothing else.
  expect(back.stats).toEqual({ docs: at.size, totalLength: 3 * at.size });
  for (const [id, v] of at) {
    const d = back.docOf(id)!;
    expect(back.idOf(d)).toBe(id);
    const pairs: (string | number)[] = [];
    for (let k = 0; k < back.listsOf(d); k++)
      pairs.push([...back.lists].find(([, l]) => l.id === back.termIds[k])![0], back.termTfs[k]);
    expect([back.docLen[d], back.docCreated[d], ...pairs]).toEqual([v[0], v[1], ...v.slice(3)]);
  }
  for (const [term, list] of back.lists)
    expect(list.live).toBe([...at.values()].filter((v) => v.slice(3).includes(term)).length);
  // And the space itself went on: it holds what is current now.
  expect(space.stats.docs).toBe(docs.size);
  for (const id of docs.keys()) expect(space.docOf(id)).toBeDefined();

  // A space read from it (its lists sealed: later postings go to a tail) follows adds and
  // removes, through a compaction (which moves the lists to the heap), exactly.
  const mapped = KeywordSpace.fromParts(readSnapshot(tmp.dir, ns, stamp)!.parts, 5);
  const want = new Map(at);
  const ids = [...want.keys()];
  for (let i = 0; i < ids.length; i++) {
    if (i % 5 !== 0) {
      mapped.remove(ids[i]);
      want.delete(ids[i]);
    }
    if (i % 3 === 0) {
      const id = Bun.randomUUIDv7();
      want.set(id, doc(5000 + i));
      mapped.add(id, want.get(id)!, true);
    }
    if (i % 40 === 0 || i === ids.length - 1) {
      expect(mapped.stats.docs).toBe(want.size);
      for (const [term, list] of mapped.lists) {
        const got: string[] = [];
        for (let k = 0; k < list.n; k++) if (!mapped.gone[list.docAt(k)]) got.push(mapped.idOf(list.docAt(k)));
        const expected = [...want].filter(([, v]) => v.slice(3).includes(term)).map(([id]) => id);
        expect(got.sort()).toEqual(expected.sort());
        expect(list.live).toBe(expected.length);
      }
    }
  }
  expect([...mapped.lists.values()].some((l) => l.sealed)).toBe(false); // compacted
});

test("a space read from a snapshot writes the documents added after it into the file's spare room (the mapping, not a copy on the heap) until that is full, then grows onto the heap, exact throughout", async () => {
  const tmp = tempDir();
  dirs.push(tmp);
  const rand = seededRandom(23);
  const word = () => vocab[Math.floor(rand() * vocab.length)];
  const doc = (i: number): (string | number)[] => {
    const v: (string | number)[] = [3, i, `e${i % 5}`];
    for (const t of new Set([word(), word(), `only${i}`])) v.push(t, 1 + (i % 3));
    return v;
  };
  const space = new KeywordSpace();
  const want = new Map<string, (string | number)[]>();
  for (let i = 0; i < 2000; i++) {
    const id = Bun.randomUUIDv7();
    want.set(id, doc(i));
    space.add(id, want.get(id)!, true);
  }
  const stamp = { format: 1, clockEpoch: 0, searchEpoch: 0 };
  const frozen = space.freeze();
  await writeSnapshot(tmp.dir, ns, { ...stamp, atMs: 1, atSeq: 1 }, frozen, snapshotJob(tmp.dir, ns), snapshotting);
  frozen.release();
  const read = readSnapshot(tmp.dir, ns, stamp)!;
  const mapped = KeywordSpace.fromParts(read.parts);
  const [name] = readdirSync(snapshotDir(tmp.dir));
  const onDisk = await Bun.file(join(snapshotDir(tmp.dir), name)).bytes();
  const file = read.parts.docLen.buffer;
  const views = () => {
    const m = mapped as unknown as Record<string, Int32Array>;
    return [m.idWords, m.docLen, m.docCreated, m.docEntity, m.docStart, m.pool].map((a) => a.buffer === file);
  };
  const exact = () => {
    expect(mapped.stats.docs).toBe(want.size);
    const expected = new Map<string, string[]>();
    for (const [id, v] of want)
      for (let i = 3; i < v.length; i += 2) expected.set(v[i] as string, [...(expected.get(v[i] as string) ?? []), id]);
    const got = new Map<string, string[]>();
    for (const [term, list] of mapped.lists) {
      const ids: string[] = [];
      for (let k = 0; k < list.n; k++) if (!mapped.gone[list.docAt(k)]) ids.push(mapped.idOf(list.docAt(k)));
      if (ids.length > 0) got.set(term, ids.sort());
    }
    for (const ids of expected.values()) ids.sort();
    expect(got).toEqual(expected);
    for (const [id, v] of want) {
      const d = mapped.docOf(id)!;
      const inEntity = mapped.entityDocuments(v[2] as string)!.docs.includes(d);
      expect([mapped.docLen[d], mapped.docCreated[d], inEntity]).toEqual([v[0] as number, v[1] as number, true]);
    }
  };
  expect(views()).toEqual([true, true, true, true, true, true]);
  // The room is 1,024 documents here (an eighth of the namespace from 8,192): 1,000 adds, changes
  // and removes stay in the file's mapping.
  const ids = [...want.keys()];
  for (let i = 0; i < 1000; i++) {
    if (i % 4 === 3) {
      mapped.remove(ids[i]);
      want.delete(ids[i]);
      continue;
    }
    const id = i % 4 === 2 ? ids[i] : Bun.randomUUIDv7(); // (a change: a new document for the same id)
    want.set(id, doc(3000 + i));
    mapped.add(id, want.get(id)!);
  }
  expect(views()).toEqual([true, true, true, true, true, true]);
  exact();
  // Past the room: copied onto the heap, and on as before.
  for (let i = 0; i < 1500; i++) {
    const id = Bun.randomUUIDv7();
    want.set(id, doc(5000 + i));
    mapped.add(id, want.get(id)!, true);
  }
  expect(views()).toEqual([false, false, false, false, false, false]);
  exact();
  // The file itself is as written, to the byte (the mapping is private: what went into the room,
  // the id table's slots and the memories removed, reaches no file; an erasure's proof counts on
  // it): read again, it holds the 2,000.
  expect(Buffer.from(await Bun.file(join(snapshotDir(tmp.dir), name)).bytes()).equals(Buffer.from(onDisk))).toBe(true);
  expect(KeywordSpace.fromParts(readSnapshot(tmp.dir, ns, stamp)!.parts).stats.docs).toBe(2000);
});
