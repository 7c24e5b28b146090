// @targets lmdb postgres binary
// Hybrid search with the built-in embedder only adds to keyword's answers: keyword's first five
// hits keep their places when at least five of its hits share a content word with the query (a
// thin list's keep theirs, and its hits sharing only stop words are no evidence), and the
// built-in embedder's meaning ranks the rest (src/search/fusion.ts keywordHead).
import { afterAll, beforeAll, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { indexTerms, queryTerms } from "../../src/text/tokens";
import { startTestServer, type TestServer, untilEmbedded } from "../helpers";

let t: TestServer;
beforeAll(async () => {
  t = await startTestServer();
});
afterAll(() => t.stop());

// bench/paraphrase-set.json's memories (written for memd's benches) and some that share words, in one entity.
const memories = [
  ...(
    JSON.parse(readFileSync(join(import.meta.dir, "../../bench/paraphrase-set.json"), "utf8")) as [string, string][]
  ).map((p) => p[0]),
  "Alice drinks green tea every morning",
  "Bob brought some tea back from Japan",
  "The tea shop near the office closed last week",
  "Her mother grows tea in the garden",
  "She spilled tea on her laptop at work",
  "Tea with lemon helps her sore throat",
  "The dog sleeps in the garden in summer",
  "Walks the dog every morning before work",
  "The dog is afraid of thunder at night",
  "Bought a new bed for the dog",
  "The neighbour's dog barks at night",
];

const queries = [
  "what does she do at home in the evening?",
  "is the user a morning person or a night owl?",
  "what does he like to eat for dinner at home?",
  "when is her birthday and what does she want?",
  "what is in the garden at the house?",
  "how does the user get to work every day?",
  "what tea does alice drink in the morning?",
  "where does the dog sleep at night?",
  "does she take tea at work?",
  "what is the dog scared of?",
];

test("hybrid's first five are keyword's first five (a thin list's evidence); the rest of the ten may come from meaning", async () => {
  for (const content of memories)
    expect((await t.json("POST", "/v1/memory", { namespace: "f", entity: "u", content, infer: false })).status).toBe(
      200,
    );
  // (Every memory with its vector first: what hybrid ranks by meaning, not the search's catch-up.)
  await untilEmbedded(t);
  let whole = 0;
  let thin = 0;
  for (const query of queries) {
    const ask = async (mode: string, limit: number) => {
      const r = await t.json("POST", "/v1/memory/search", { namespace: "f", entity: "u", query, mode, limit });
      expect(r.status).toBe(200);
      expect(r.body.mode).toBe(mode);
      return r.body.results.map((m: { content: string }) => m.content) as string[];
    };
    // (As deep as the fusion reads keyword's list.)
    const keyword = await ask("keyword", 30);
    const hybrid = await ask("hybrid", 10);
    const words = new Set(
      queryTerms(query)
        .filter((q) => q.weight === 1)
        .map((q) => q.term),
    );
    const evidence = keyword.filter((m) => indexTerms(m).some((w) => words.has(w)));
    // No keyword hit shares a word other than a stop word: keyword's list is no evidence and
    // hybrid is the semantic ranking.
    if (evidence.length === 0) continue;
    if (evidence.length >= 5) {
      // Keyword's head: its first five, whatever they share.
      whole++;
      expect({ query, first: hybrid.slice(0, 5) }).toEqual({ query, first: keyword.slice(0, 5) });
    } else {
      // A thin list: its hits sharing a content word first, those sharing only stop words no
      // evidence (the rest of the ten is ranked by meaning).
      thin++;
      expect({ query, first: hybrid.slice(0, evidence.length) }).toEqual({ query, first: evidence });
    }
  }
  expect(whole).toBeGreaterThan(2);
  expect(thin).toBeGreaterThan(2);
});

test("a thin keyword list's hits sharing only stop words give their places to the memory meant", async () => {
  // (The memories are stored by the test above.) Keyword finds one hit sharing a content word
  // ("lives", "weekends", "bread"), then hits sharing only "the", "at", "for": those held places
  // two and three before, ahead of the paraphrase the query means.
  for (const [query, meant] of [
    ["where does the user live", "I moved to Lisbon"],
    ["what does she cook at the weekend?", "I bake sourdough bread on Sundays"],
    ["is bread okay for him?", "Cannot eat gluten"],
  ]) {
    const r = await t.json("POST", "/v1/memory/search", { namespace: "f", entity: "u", query, limit: 3 });
    expect(r.status).toBe(200);
    expect(r.body.mode).toBe("hybrid");
    expect({ query, top3: r.body.results.map((m: { content: string }) => m.content) }).toEqual({
      query,
      top3: expect.arrayContaining([meant]),
    });
  }
});
