import { describe, expect, test } from "bun:test";
import {
  builtinFacts,
  extractBuiltin,
  normalizeFact,
  selectCandidates,
  similarity,
  splitFacts,
} from "../../src/extraction/builtin";

describe("splitFacts", () => {
  test.each([
    [
      "sentences",
      "I like tea. I live in Paris! Do I have a cat?",
      ["I like tea.", "I live in Paris!", "Do I have a cat?"],
    ],
    [
      "lines and list markers",
      "- I like tea\n* I ski\n1. I work at ACME\n2) I am 30",
      ["I like tea", "I ski", "I work at ACME", "I am 30"],
    ],
    ["white space and empties", "  \n\n  I like tea.   \n\n ... \n", ["I like tea."]],
    ["an abbreviation stays with its sentence", "Dr. Smith is my doctor.", ["Dr. Smith is my doctor."]],
    ["no space after the period", "I moved in 2023.I have a dog.", ["I moved in 2023.", "I have a dog."]],
    ["nothing", "   ", []],
  ])("%s", (_name, content, facts) => {
    expect(splitFacts(content)).toEqual(facts);
  });
});

test("normalizeFact folds case and white space and strips trailing punctuation", () => {
  expect(normalizeFact("  I  LIKE\tGreen\nTea!!! ")).toBe("i like green tea");
  expect(normalizeFact("Version 2.0 rocks.")).toBe("version 2.0 rocks");
});

describe("similarity", () => {
  test.each([
    ["same words, other order and case", "I like tea and coffee", "i like COFFEE and tea", 1],
    ["one changed number", "my pin is 1234", "my pin is 1235", 3 / 5],
    ["nothing shared", "I like tea", "you ski", 0],
  ])("%s", (_name, a, b, expected) => {
    expect(similarity(a, b)).toBeCloseTo(expected, 5);
  });
});

describe("extractBuiltin", () => {
  const existing = [
    { id: "a", content: "I live in Paris." },
    { id: "b", content: "My favourite food is pasta with tomato sauce and basil" },
  ];

  test("adds new facts, skips exact and near duplicates of existing memories", () => {
    const r = extractBuiltin(
      "i LIVE in   paris! I have a cat. My favourite food is pasta with fresh tomato sauce and basil. I live in Lyon.",
      existing,
    );
    expect(r.facts).toEqual(["I have a cat.", "I live in Lyon."]);
    expect(r.skipped).toEqual([
      { fact: "i LIVE in   paris!", duplicateOf: existing[0] },
      { fact: "My favourite food is pasta with fresh tomato sauce and basil.", duplicateOf: existing[1] },
    ]);
  });

  test("skips facts that repeat an earlier fact of the same content", () => {
    const r = extractBuiltin("I have a cat. I have a cat! A cat I have.", []);
    expect(r.facts).toEqual(["I have a cat."]);
    expect(r.skipped.map((s) => s.duplicateOf)).toEqual([undefined, undefined]);
  });

  test("a different number is a different fact", () => {
    const r = extractBuiltin("My PIN is 1235.", [{ content: "My PIN is 1234." }]);
    expect(r.facts).toEqual(["My PIN is 1235."]);
  });

  test("empty content yields nothing", () => {
    expect(extractBuiltin("  \n ", existing)).toEqual({ facts: [], skipped: [] });
  });
});

describe("selectCandidates", () => {
  const memories = [
    { id: 1, content: "User lives in Paris" },
    { id: 2, content: "User likes green tea" },
    { id: 3, content: "User works at ACME as an engineer" },
    { id: 4, content: "The user is a morning person" },
    { id: 5, content: "User drinks tea every morning in Paris" },
  ];

  test("ranks by the share of a memory's keywords found in the content, leaves unrelated ones out", () => {
    const picked = selectCandidates("I moved from Paris to Berlin and I like tea", memories);
    expect(picked.map((m) => m.id)).toEqual([2, 1, 5]); // 2/3, 1/2, 2/5 of their keywords
  });

  test("stopwords alone relate nothing", () => {
    expect(selectCandidates("the user is a", memories)).toEqual([]);
  });

  test("is bounded by max", () => {
    const many = Array.from({ length: 100 }, (_, i) => ({ content: `User likes tea number ${i}` }));
    expect(selectCandidates("I like tea", many)).toHaveLength(20);
    expect(selectCandidates("I like tea", many, 5)).toHaveLength(5);
    expect(selectCandidates("I like tea", many, 0)).toEqual([]);
  });
});

describe("splitFacts on chat text", () => {
  test.each([
    ["lowercase sentences", "i like cats. i hate dogs.", ["i like cats.", "i hate dogs."]],
    ["lowercase after ! and ?", "wow! is it? yes it is.", ["wow! is it?", "yes it is."]],
    [
      "an abbreviation before a lowercase name",
      "dr. smith is my doctor. i see him often.",
      ["dr. smith is my doctor.", "i see him often."],
    ],
    ["Dr. Smith", "I saw Dr. Smith today. he was kind.", ["I saw Dr. Smith today.", "he was kind."]],
    ["a decimal", "the trail is 3.5 km long. we walk it often.", ["the trail is 3.5 km long.", "we walk it often."]],
    [
      "e.g.",
      "i like hot drinks, e.g. tea and cocoa. nothing cold.",
      ["i like hot drinks, e.g. tea and cocoa.", "nothing cold."],
    ],
    ["an initial", "my friend j. doe lives here. he is nice.", ["my friend j. doe lives here.", "he is nice."]],
  ])("%s", (_name, content, facts) => {
    expect(splitFacts(content)).toEqual(facts);
  });

  test("a lowercase duplicate inside chat text is caught", () => {
    const r = extractBuiltin("i like cats. i hate dogs.", [{ id: "a", content: "I like cats" }]);
    expect(r.facts).toEqual(["i hate dogs."]);
    expect(r.skipped).toEqual([{ fact: "i like cats.", duplicateOf: { id: "a", content: "I like cats" } }]);
  });
});

describe("builtinFacts: what a conversation leaves without a model", () => {
  test.each([
    ["a role prefix is dropped", "user: I like hiking.", ["I like hiking."]],
    [
      "the assistant's turns are left out",
      "user: I like hiking.\nassistant: Nice! Hiking is great exercise.",
      ["I like hiking."],
    ],
    [
      "several turns, labels in any case, small talk of both sides",
      "User: Hi there\nAssistant: Hello! How can I help?\nUser: I moved to Lisbon. Thanks!\nAssistant: Great, noted.",
      ["I moved to Lisbon."],
    ],
    [
      "a turn over several lines",
      "user: I have two cats.\nTheir names are Tom and Kit.\nassistant: Cute!",
      ["I have two cats.", "Their names are Tom and Kit."],
    ],
    [
      "system and tool turns are never kept",
      "system: You are helpful.\nuser: I prefer green tea\ntool: ok",
      ["I prefer green tea"],
    ],
    [
      "no user turn: an agent's own notes are kept",
      "assistant: The deploy runs at 9 UTC.",
      ["The deploy runs at 9 UTC."],
    ],
    [
      "a greeting before a statement",
      "Hey! I'm Marcus. Hi there, I work at Shopify.",
      ["I'm Marcus.", "I work at Shopify."],
    ],
    [
      "an answer word before a statement",
      "No, I live in Braga. Sounds good. I'll take the 9am train.",
      ["I live in Braga.", "I'll take the 9am train."],
    ],
    [
      "a word that only starts a statement stays",
      "Fine wine is my hobby. No meat for me. Great news: I got promoted!",
      ["Fine wine is my hobby.", "No meat for me.", "Great news: I got promoted!"],
    ],
    ["a label that is no role stays", "Note: buy milk", ["Note: buy milk"]],
    [
      "contradictions are not judged: both stay",
      "Lives in Porto. Lives in Braga now.",
      ["Lives in Porto.", "Lives in Braga now."],
    ],
  ])("%s", (_name, content, facts) => {
    expect(builtinFacts(content)).toEqual(facts);
  });

  test.each([
    "Nice!",
    "Thanks",
    "Hi there",
    "ok",
    "OK.",
    "Thank you so much for the help!",
    "Thanks, Bob!",
    "Hi Sam.",
    "Hey, good morning!",
    "Good morning, how are you?",
    "Yes.",
    "Got it, cool.",
    "user: Hello!\nassistant: Hi! How can I help you today?\nuser: ok thanks",
  ])("small talk alone stores nothing: %p", (content) => {
    expect(builtinFacts(content)).toEqual([]);
    expect(extractBuiltin(content, []).facts).toEqual([]);
  });
});
