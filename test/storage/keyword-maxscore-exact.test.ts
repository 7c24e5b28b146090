// @targets lmdb
// The namespace-wide keyword search over in-memory lists (src/index/keyword/walk.ts: MaxScore,
// document at a time, bounds from each list's skyline) returns exactly what scoring every live
// document would: the same documents, in the same order (score, then newer, then id), with the
// same scores to the bit. Random lists with long and short ones, tfs past the skyline's single
// slots, tied scores and times, removals and compactions, lists read back from a frozen copy
// (sealed, with tails), and `accept` turning documents down (its second pass).
import { expect, test } from "bun:test";
import {
  type FrozenSpace,
  KeywordSpace,
  keywordSearch,
  maxScoreStats,
  maxScoreTuning,
  type SpaceParts,
} from "../../src/index/keyword";
import { bm25n, idf, lengthNormOf, type QueryTerm } from "../../src/text/scoring";
import { queryTerms } from "../../src/text/tokens";
import { seededRandom } from "../helpers";

/** A frozen space's sections put together, as a snapshot's reader would view them. */
function thaw(f: FrozenSpace): SpaceParts {
  const pieces: (Int32Array | Uint16Array | Uint8Array | Float64Array)[][] = Array.from({ length: 11 }, () => []);
  for (const [section, piece] of f.pieces(256)) pieces[section].push(piece.slice());
  f.release();
  const join = <T extends Int32Array | Uint16Array | Uint8Array | Float64Array>(
    i: number,
    make: new (n: number) => T,
  ): T => {
    const out = new make(pieces[i].reduce((a, p) => a + p.length, 0));
    let at = 0;
    for (const p of pieces[i]) {
      out.set(p as never, at);
      at += p.length;
    }
    return out;
  };
  const listN = join(6, Int32Array);
  const docs = join(8, Int32Array);
  const tfs = join(9, Uint16Array);
  const listDoc: Int32Array<ArrayBuffer>[] = [];
  const listTf: Uint16Array<ArrayBuffer>[] = [];
  let from = 0;
  for (const n of listN) {
    listDoc.push(docs.subarray(from, from + n));
    listTf.push(tfs.subarray(from, from + n));
    from += n;
  }
  return {
    count: f.count,
    idWords: join(0, Int32Array),
    docLen: join(1, Int32Array),
    docCreated: join(2, Float64Array),
    docEntity: join(3, Int32Array),
    docStart: join(4, Int32Array),
    pool: join(5, Uint8Array),
    listN,
    listMaxLen: join(7, Int32Array),
    listDoc,
    listTf,
    postings: f.postings,
    terms: f.terms,
    entities: f.entities,
    otherIds: f.otherIds,
    table: join(10, Int32Array),
  };
}

type Doc = { id: string; len: number; created: number; tf: Map<string, number> };

/**
 * Every live document scored: the query's terms (each at its highest weight) summed rarest first
 * (ties by term), as the search sums them; ranked by score, then createdAt, then id.
 */
function bruteForce(live: Map<string, Doc>, terms: QueryTerm[], limit: number, accept: (id: string) => boolean) {
  const docs = [...live.values()];
  // The scope's average length and b (text/scoring.ts lengthNormB: the spread of its lengths).
  const avg = lengthNormOf(docs.map((d) => d.len));
  const weights = new Map<string, number>();
  for (const t of terms) weights.set(t.term, Math.max(weights.get(t.term) ?? 0, t.weight));
  const ts = [...weights]
    .map(([term, weight]) => ({ term, df: docs.filter((d) => d.tf.has(term)).length, weight }))
    .filter((t) => t.df > 0)
    .map((t) => ({ term: t.term, w: t.weight * idf(docs.length, t.df) }))
    .sort((a, b) => b.w - a.w || (a.term < b.term ? -1 : 1));
  return docs
    .filter((d) => ts.some((t) => d.tf.has(t.term)) && accept(d.id))
    .map((d) => {
      let score = 0;
      for (const t of ts) if (d.tf.has(t.term)) score += bm25n(t.w, Math.min(65535, d.tf.get(t.term)!), d.len, avg);
      return { d, score };
    })
    .sort((a, b) => b.score - a.score || b.d.created - a.d.created || (a.d.id < b.d.id ? 1 : -1))
    .slice(0, limit)
    .map(({ d, score }) => [d.id, score]);
}

test("namespace keyword search by MaxScore answers exactly as scoring every document", () => {
  const rand = seededRandom(Number(process.env.SEARCH_PROPERTY_SEED ?? 26));
  const int = (n: number) => Math.floor(rand() * n);
  // Zipf-like: "t0" is in most documents, "t11" in few.
  const vocab = Array.from({ length: 12 }, (_, i) => `t${i}`);
  const word = () => vocab[Math.min(vocab.length - 1, Math.floor(Math.exp(rand() * Math.log(vocab.length + 1)) - 1))];
  // Some rounds with tfs past the skyline's single slots (up to past the most kept, 65,535),
  // others with tfs of 1 to 3 only: bounds set by one slot or another, and many equal scores.
  let high = false;
  let spread = false;
  const tfOf = () => {
    const r = rand();
    if (!high) return r < 0.6 ? 1 : 2 + int(2);
    return r < 0.6 ? 1 : r < 0.85 ? 2 + int(3) : r < 0.97 ? 5 + int(10) : 100 + int(70000);
  };
  const pruned = maxScoreStats.nonEssential;
  const seeded = maxScoreStats.seeded;
  let compared = 0;
  let rejectedSome = 0;
  let compacted = 0;
  for (let round = 0; round < 12; round++) {
    high = round % 2 === 0;
    spread = round % 3 === 2;
    let space = new KeywordSpace(round % 3 === 0 ? 20 : 10_000);
    const live = new Map<string, Doc>();
    const ids: string[] = [];
    const newId = (i: number) =>
      i % 5 === 4
        ? `note-${round}-${i}`
        : `0190${(round * 4096 + i).toString(16).padStart(4, "0")}-0000-7000-8000-${int(1e12).toString(16).padStart(12, "0")}`;
    const add = (id: string) => {
      const tf = new Map<string, number>();
      for (let k = 1 + int(6); k > 0; k--) tf.set(word(), tfOf());
      // Few lengths and times (many equal scores, and equal scores of equal times), or lengths
      // spread wide (a short document added late moves its lists' bounds), some past 255.
      const len = spread ? tf.size + int(round % 2 ? 60 : 400) : tf.size + int(4) * 5;
      const doc: Doc = { id, len, created: 1000 + int(6), tf };
      const v: (string | number)[] = [doc.len, doc.created, `e${int(3)}`];
      for (const [term, n] of tf) v.push(term, n);
      space.add(id, v);
      live.set(id, doc);
    };
    const churn = (n: number) => {
      for (let i = 0; i < n; i++) {
        const r = rand();
        if (r < 0.15 && live.size > 0) {
          const id = [...live.keys()][int(live.size)];
          space.remove(id);
          live.delete(id);
        } else if (r < 0.3 && live.size > 0)
          add([...live.keys()][int(live.size)]); // changed: a new document
        else {
          ids.push(newId(ids.length));
          add(ids[ids.length - 1]);
        }
      }
    };
    churn(150 + int(400));
    if (round % 2 === 1) {
      // Read back from a frozen copy: lists sealed, later postings in their tails.
      space = KeywordSpace.fromParts(thaw(space.freeze()), round % 3 === 0 ? 20 : 10_000);
      churn(int(200));
    }
    for (let i = 0; i < 40; i++) {
      // (Postings added after a list's skyline was made must move it.)
      if (i % 4 === 3) churn(1 + int(20));
      if (i === 20 && round % 3 === 0) {
        // Most documents go: the space compacts (renumbers what is left) between searches.
        const before = space.count;
        for (const id of [...live.keys()]) {
          if (rand() < 0.3) continue;
          space.remove(id);
          live.delete(id);
        }
        expect(space.count).toBeLessThan(before);
        compacted++;
      }
      const terms: QueryTerm[] = Array.from({ length: 1 + int(5) }, () => ({
        term: rand() < 0.05 ? "absent" : word(),
        weight: rand() < 0.3 ? 0.35 : 1,
      }));
      const limit = [1, 3, 10, 50][int(4)];
      const turnedDown = rand() < 0.3 ? new Set([...live.keys()].filter(() => rand() < 0.4)) : new Set<string>();
      const accept = (id: string) => !turnedDown.has(id);
      const want = bruteForce(live, terms, limit, accept);
      // The list of the highest bound scored first when short (the default), always, never.
      for (const seedRatio of [4, 0, Number.POSITIVE_INFINITY]) {
        maxScoreTuning.seedRatio = seedRatio;
        const got = keywordSearch(space, { namespace: "n" }, terms, limit, (id) =>
          accept(id) ? ({ id } as never) : null,
        ).map((h) => [(h.memory as { id: string }).id, h.score]);
        expect({ round, i, seedRatio, got }).toEqual({ round, i, seedRatio, got: want });
      }
      maxScoreTuning.seedRatio = 4;
      compared++;
      if (turnedDown.size > 0) rejectedSome++;
    }
  }
  expect(compared).toBe(480);
  expect(rejectedSome).toBeGreaterThan(50);
  expect(compacted).toBe(4);
  // Lists were left unwalked (not essential) in some searches, so the pruning is what was checked.
  expect(maxScoreStats.nonEssential - pruned).toBeGreaterThan(100);
  expect(maxScoreStats.seeded - seeded).toBeGreaterThan(480);
});

test("a list's bound follows the postings added after its first search", () => {
  // "a" in 200 documents (tf 1), "r" in 162 others (tf 1), all of length 5: r's idf is a little
  // above a's. Searched for "a r", limit 1: once an r document is on top, a alone cannot beat it,
  // so a is not essential. Then a document with "a" 3 times comes: it beats every r document,
  // and must be found although only a holds it.
  const space = new KeywordSpace();
  const uuid = (i: number) => `01900000-0000-7000-8000-${i.toString(16).padStart(12, "0")}`;
  let i = 0;
  for (; i < 400; i++) space.add(uuid(i), [5, 1000, "e", i < 200 ? "a" : i < 362 ? "r" : "z", 1], true);
  const search = () =>
    keywordSearch(space, { namespace: "n" }, queryTerms("a r"), 1, (id) => ({ id }) as never).map(
      (h) => (h.memory as { id: string }).id,
    );
  const pruned = maxScoreStats.nonEssential;
  expect(search()).toEqual([uuid(361)]);
  expect(maxScoreStats.nonEssential).toBeGreaterThan(pruned);
  space.add(uuid(i), [5, 1000, "e", "a", 3], true);
  expect(search()).toEqual([uuid(i)]);
});
