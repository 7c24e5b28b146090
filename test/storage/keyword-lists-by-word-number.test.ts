// @targets lmdb
// LMDB's keyword lists take a memory's terms from its text (KeywordSpace.addText), finding each
// term's list by the word's number in the process's word cache (src/text/language.ts) instead of
// by its text: the lists, the documents' pool and every answer must be exactly those of
// add(packTerms(...)), through changes, removals and compactions (which drop emptied lists: a
// word's number must not find one again), for texts of any script, and when the word cache is
// emptied and numbers its words again.
import { afterAll, expect, test } from "bun:test";
import { KeywordSpace, keywordSearch, packTerms } from "../../src/index/keyword/index";
import { wordCache } from "../../src/text/language";
import { queryTerms } from "../../src/text/tokens";
import { seededRandom } from "../helpers";

const max = wordCache.max;
afterAll(() => {
  wordCache.max = max;
});

const vocab = [
  ..."we are running runs ran house houses the and tea coffee dog cat w1 ab12 9".split(" "),
  ..."die der und le la les maison été Café cafe Straße 東京タワー it's a.b foo_bar Hello WORLD".split(" "),
  "x".repeat(70),
];

/** Everything a space's lists and documents hold, in a form two spaces can be compared by. */
const contents = (s: KeywordSpace) => ({
  terms: [...s.lists].map(([term, l]) => [term, l.id]),
  lists: s.listById.map((l) => [l.n, l.live, [...l.doc.subarray(0, l.n)], [...l.tf.subarray(0, l.n)]]),
  pool: [...s.pool.subarray(0, s.docStart[s.count])],
  docs: [s.count, s.live, s.totalLength, s.totalSquares, [...s.docLen.subarray(0, s.count)]],
});

for (const [name, cacheMax, packed] of [
  ["the word cache kept", max, false],
  ["the word cache emptied every 40 words", 40, false],
  ["packed at first, the word cache kept", max, true],
] as const)
  test(`lists built from texts by word number are those of packTerms (${name})`, () => {
    wordCache.max = cacheMax;
    const rand = seededRandom(43);
    const pick = <T>(xs: readonly T[]) => xs[Math.floor(rand() * xs.length)];
    // (A small compactAfter: compactions drop emptied lists, which a term's number may name.)
    const byText = new KeywordSpace(10, packed);
    const byTerms = new KeywordSpace(10, packed);
    const ids: string[] = [];
    let compactions = 0;
    for (let i = 0; i < 1200; i++) {
      const text = Array.from(
        { length: 1 + Math.floor(rand() * 30) },
        () => pick(vocab) + (rand() < 0.3 ? String(Math.floor(rand() * 400)) : ""),
      ).join(rand() < 0.5 ? " " : ", ");
      // (Removals and changes as often as new memories: more than half gone, so it compacts.)
      const isNew = ids.length === 0 || rand() < 0.4;
      const id = isNew ? (rand() < 0.05 ? `other-${i}` : crypto.randomUUID()) : pick(ids);
      if (isNew) ids.push(id);
      else if (rand() < 0.5) {
        const count = byText.count;
        byText.remove(id);
        byTerms.remove(id);
        if (byText.count < count) compactions++;
        continue;
      }
      byText.addText(id, text, i, `e${i % 5}`, isNew);
      byTerms.add(id, packTerms(text, i, `e${i % 5}`), isNew);
    }
    expect(byText.packed).toBe(false);
    // (Unpacked from the start: every list of the space was found by number, some dropped since.)
    if (!packed) expect(compactions).toBeGreaterThan(0);
    expect(contents(byText)).toEqual(contents(byTerms));
    for (const q of ["running houses", "cafe tea", "東京", "the dog and the cat", "w1 9 ab12"])
      for (const entity of [undefined, "e2"]) {
        const answer = (s: KeywordSpace) =>
          keywordSearch(s, { entity }, queryTerms(q), 20, (id) => ({ id })).map((h) => `${h.memory.id}:${h.score}`);
        expect(answer(byText)).toEqual(answer(byTerms));
      }
  });

test("a term whose list a compaction dropped gets a list again when it comes back, as by packTerms", () => {
  wordCache.max = max;
  const byText = new KeywordSpace(10);
  const byTerms = new KeywordSpace(10);
  const ids = Array.from({ length: 300 }, () => crypto.randomUUID());
  const both = (i: number, id = ids[i]) => {
    byText.addText(id, `common rare${i}`, i, "e", true);
    byTerms.add(id, packTerms(`common rare${i}`, i, "e"), true);
  };
  for (let i = 0; i < 300; i++) both(i);
  // (More than half gone: a compaction, which drops the lists of rare0 to rare150.)
  for (let i = 0; i < 200; i++) {
    byText.remove(ids[i]);
    byTerms.remove(ids[i]);
  }
  expect(byText.count).toBeLessThan(300);
  for (let i = 0; i < 50; i++) both(i, crypto.randomUUID());
  expect(contents(byText)).toEqual(contents(byTerms));
  const answer = (s: KeywordSpace) =>
    keywordSearch(s, {}, queryTerms("rare7"), 5, (id) => ({ id })).map((h) => h.memory.id);
  expect(answer(byText)).toHaveLength(1);
  expect(answer(byText)).toEqual(answer(byTerms));
});
