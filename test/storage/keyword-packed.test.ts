// @targets lmdb
// A small namespace's keyword space keeps its documents packed (src/index/keyword/space.ts,
// `packing`): no list per term, memory in proportion to what it holds, and every search answers
// exactly what lists of the same documents answer (ids, order and scores to the bit), through
// adds, changes and removals, over the namespace and an entity, and past the size where it
// unpacks for good.
import { afterAll, expect, test } from "bun:test";
import { type DocTerms, KeywordSpace, keywordSearch, packing, packTerms } from "../../src/index/keyword/index";
import { PackedDocs } from "../../src/index/keyword/packed";
import { queryTerms } from "../../src/text/tokens";
import { seededRandom } from "../helpers";

const upTo = packing.upTo;
afterAll(() => {
  packing.upTo = upTo;
});

const vocab = "tea coffee cafe dog cat lisbon paris nurse piano runs daily vegan meat sails boat red blue".split(" ");

test("a packed space answers as lists do, through adds, changes and removals, and unpacks past packing.upTo", () => {
  packing.upTo = 40;
  const rand = seededRandom(32);
  const pick = <T>(xs: readonly T[]) => xs[Math.floor(rand() * xs.length)];
  const packed = new KeywordSpace(undefined, true);
  const lists = new KeywordSpace();
  const live: string[] = [];
  let n = 0;
  const answers = (s: KeywordSpace, q: string, entity?: string, limit = 10) =>
    keywordSearch(s, { entity }, queryTerms(q), limit, (id) => ({ id })).map((h) => `${h.memory.id}:${h.score}`);
  for (let step = 0; step < 120; step++) {
    const r = rand();
    if (live.length === 0 || r < 0.6) {
      const id = Bun.randomUUIDv7();
      const text = Array.from({ length: 1 + Math.floor(rand() * 6) }, () => pick(vocab)).join(" ");
      // (Some ids are not UUIDs: kept aside by the lists.)
      const key = rand() < 0.1 ? `other-${n++}` : id;
      const terms = packTerms(text, 1_000 + Math.floor(rand() * 5), `e${Math.floor(rand() * 3)}`);
      packed.add(key, terms);
      lists.add(key, terms);
      live.push(key);
    } else if (r < 0.8) {
      const key = pick(live);
      const terms = packTerms(`${pick(vocab)} ${pick(vocab)}`, 2_000, "e1");
      packed.add(key, terms);
      lists.add(key, terms);
    } else {
      const key = live.splice(Math.floor(rand() * live.length), 1)[0];
      packed.remove(key);
      lists.remove(key);
    }
    if (live.length <= packing.upTo && step < 60) {
      expect(packed.packed).toBe(true);
      expect(packed.lists.size).toBe(0);
    }
    expect(packed.stats).toEqual(lists.stats);
    const q = `${pick(vocab)} ${pick(vocab)}`;
    for (const entity of [undefined, "e1"])
      for (const limit of [1, 10, 100])
        expect(answers(packed, q, entity, limit)).toEqual(answers(lists, q, entity, limit));
  }
  // Past packing.upTo it holds lists, as any space.
  expect(live.length).toBeGreaterThan(packing.upTo);
  expect(packed.packed).toBe(false);
  expect(packed.lists.size).toBeGreaterThan(0);
});

test("a small space costs memory in proportion to what it holds (no fixed room of tens of KB)", () => {
  packing.upTo = upTo;
  const rand = seededRandom(33);
  const text = () => Array.from({ length: 8 }, () => `w${Math.floor(rand() * 5000)}`).join(" ");
  const sized = (docs: number) => {
    const s = new KeywordSpace(undefined, true);
    for (let i = 0; i < docs; i++) s.add(Bun.randomUUIDv7(), packTerms(text(), 1, "e"), true);
    return s.heldBytes();
  };
  const one = sized(1);
  const twenty = sized(20);
  const two = sized(200);
  expect(one).toBeLessThan(2048);
  expect(twenty).toBeLessThan(20 * 400);
  // Ten times the documents, about ten times the bytes (less the space's own ~1 KB).
  expect(two / twenty).toBeGreaterThan(7);
  expect(two / twenty).toBeLessThan(11);
  // Lists (not packed) of one document no longer start with tens of KB of room either.
  const lists = new KeywordSpace();
  lists.add(Bun.randomUUIDv7(), packTerms(text(), 1, "e"), true);
  expect(lists.heldBytes()).toBeLessThan(8 * 1024);
});

test("packed records give back every document exactly: any id, any string, large tfs and lengths, any time", () => {
  const docs: [string, DocTerms][] = [
    ["0190b2f4-7a3e-7c11-8d2e-0a1b2c3d4e5f", [3, 1_732_900_000_123, "e1", "tea", 2, "cafe", 1]],
    ["0190B2F4-7A3E-7C11-8D2E-0A1B2C3D4E5F", [1, 0.5, "", "x", 1]], // not lowercase: kept as a string
    ["other-id", [300, -12.25, "Zoë 東京", "東京", 200, "naïve", 130, "w".repeat(70), 1]],
    ["x\ud800y", [2, Number.MAX_SAFE_INTEGER, "e\udc00", "a\ud83d\ude00b", 16_384]], // lone surrogates kept
  ];
  const p = new PackedDocs();
  for (const [id, v] of docs) p.add(id, [...v]);
  expect([...p.docs()]).toEqual(docs);
  // Only the terms asked for, the length still all of them.
  expect([...p.docs(new Set(["東京", "cafe", "nope"]))]).toEqual([
    [docs[0][0], [3, 1_732_900_000_123, "e1", "cafe", 1]],
    [docs[1][0], [1, 0.5, ""]],
    [docs[2][0], [300, -12.25, "Zoë 東京", "東京", 200]],
    [docs[3][0], [2, Number.MAX_SAFE_INTEGER, "e\udc00"]],
  ]);
  expect(p.remove("other-id")).toBe(300);
  expect(p.remove("other-id")).toBeUndefined();
  expect(p.remove(docs[0][0])).toBe(3);
  expect([...p.docs()]).toEqual([docs[1], docs[3]]);
  p.trim();
  expect(p.bytes.length).toBe(p.end);
  p.add(docs[0][0], [...docs[0][1]]);
  expect([...p.docs()]).toEqual([docs[1], docs[3], docs[0]]);
});
