// @targets lmdb postgres binary
// Hybrid search with the built-in embedder only adds to keyword's answers: keyword's first five
// hits keep their places, and the built-in embedder's meaning ranks the rest (src/search/fusion.ts
// keywordHead).
import { afterAll, beforeAll, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { indexTerms, queryTerms } from "../../src/text/tokens";
import { startTestServer, type TestServer } from "../helpers";

let t: TestServer;
beforeAll(async () => {
  t = await startTestServer();
});
afterAll(() => t.stop());

// bench/paraphrase-set.json's memories (written for memd's benches), in one entity.
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

test("hybrid's first five are keyword's first five; the rest of the ten may come from meaning", async () => {
  for (const content of memories)
    expect((await t.json("POST", "/v1/memory", { namespace: "f", entity: "u", content, infer: false })).status).toBe(
      200,
    );
  let compared = 0;
  for (const query of queries) {
    const ask = async (mode: string) => {
      const r = await t.json("POST", "/v1/memory/search", { namespace: "f", entity: "u", query, mode, limit: 10 });
      expect(r.status).toBe(200);
      expect(r.body.mode).toBe(mode);
      return r.body.results.map((m: { content: string }) => m.content) as string[];
    };
    const keyword = await ask("keyword");
    const hybrid = await ask("hybrid");
    // Keyword's head: its first five, when one of its hits shares a word other than a stop word
    // (else keyword's list is no evidence and hybrid is the semantic ranking).
    const words = new Set(
      queryTerms(query)
        .filter((q) => q.weight === 1)
        .map((q) => q.term),
    );
    if (!keyword.some((m) => indexTerms(m).some((w) => words.has(w)))) continue;
    const head = Math.min(5, keyword.length);
    if (head < 3) continue;
    compared++;
    expect({ query, first: hybrid.slice(0, head) }).toEqual({ query, first: keyword.slice(0, head) });
  }
  expect(compared).toBeGreaterThan(4);
});
