// The terms and weights a query is searched by (text/tokens.ts queryTerms), and the index terms
// of a text: stems in the text's language; stop words weigh STOP_WORD_WEIGHT except names,
// dates and numbers.
import { expect, test } from "bun:test";
import { STOP_WORD_WEIGHT } from "../../src/text/scoring";
import { indexTerms, queryTerms } from "../../src/text/tokens";

const weights = (q: string) => Object.fromEntries(queryTerms(q).map((t) => [t.term, t.weight]));

test("a query's stop words weigh less; its other words are searched as themselves and by stem", () => {
  expect(weights("When did Caroline go to the support groups?")).toEqual({
    when: STOP_WORD_WEIGHT,
    did: STOP_WORD_WEIGHT,
    carolin: 1,
    caroline: 1,
    go: STOP_WORD_WEIGHT,
    to: STOP_WORD_WEIGHT,
    the: STOP_WORD_WEIGHT,
    support: 1,
    group: STOP_WORD_WEIGHT,
    groups: STOP_WORD_WEIGHT,
  });
});

test("names and months written as such, and numbers, weigh in full; a query of stop words only too", () => {
  expect(weights("Did Will call in May?")).toMatchObject({ will: 1, may: 1, did: STOP_WORD_WEIGHT });
  expect(weights("what happened in may 2023")).toMatchObject({ may: 1, 2023: 1, in: STOP_WORD_WEIGHT });
  expect(weights("who is she?")).toEqual({ who: 1, is: 1, she: 1 });
});

test("a query of no language is searched by its stem in every language", () => {
  const terms = queryTerms("Straße").map((t) => t.term);
  expect(terms).toContain("strasse");
  expect(terms).toContain("strass");
  expect(queryTerms("烤鸭")).toEqual([{ term: "烤鸭", weight: 1 }]);
});

test("index terms: stemmed in the text's language; a text of no language keeps its words", () => {
  expect(indexTerms("She loves painting landscapes")).toEqual(["she", "love", "paint", "landscap"]);
  expect(indexTerms("Er wohnt in der Straße")).toEqual(["er", "wohnt", "in", "der", "strass"]);
  expect(indexTerms("Luna Milo paintings 42")).toEqual(["luna", "milo", "paintings", "42"]);
});

test("one stop word of another language is no evidence: a short English text is not taken for French", () => {
  // "bravo" is a French stop word; alone it does not make the text French.
  expect(indexTerms("Collects stamps, album bravo.")).toEqual(["collects", "stamps", "album", "bravo"]);
  expect(indexTerms("Collects stamps, album alpha.")).toEqual(["collects", "stamps", "album", "alpha"]);
  // Two are: "Elle a travaillé comme chanteuse" is French.
  expect(indexTerms("Elle chantait dans un café")).toEqual(["elle", "chant", "dan", "un", "caf"]);
  // English, the default, needs one: "to".
  expect(indexTerms("Moved to Berlin")).toEqual(["move", "to", "berlin"]);
});
