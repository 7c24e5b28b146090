// The ASCII fast paths of tokenize and of index terms give exactly the terms of the general path.
import { expect, test } from "bun:test";
import { stemText } from "../../src/text/language";
import { indexTerms, segmented, tokenize } from "../../src/text/tokens";

test("tokenize: the ASCII fast path agrees with Intl.Segmenter", () => {
  let seed = 20261122;
  const rand = () => {
    seed = (seed * 1103515245 + 12345) & 0x7fffffff;
    return seed / 0x7fffffff;
  };
  const pieces = [
    "a",
    "Z",
    "q",
    "7",
    "0",
    " ",
    " ",
    "\t",
    "\n",
    ".",
    ",",
    ";",
    ":",
    "'",
    '"',
    "-",
    "!",
    "?",
    "(",
    ")",
    "/",
    "@",
    "#",
    "_",
    "x".repeat(70),
    "ab",
    "1.5",
    "don't",
  ];
  for (let i = 0; i < 20000; i++) {
    const text = Array.from(
      { length: 1 + Math.floor(rand() * 12) },
      () => pieces[Math.floor(rand() * pieces.length)],
    ).join("");
    expect([text, tokenize(text)]).toEqual([text, segmented(text)]);
  }
  for (const text of ["The user prefers green tea.", "e-mail me at 10:30, ok?", "U.S.A. 3.14 it's", "snake_case x", ""])
    expect(tokenize(text)).toEqual(segmented(text));
});

test("case folding beyond lower case: ß and final sigma fold as Unicode's full case folding does", () => {
  expect(tokenize("Straße STRASSE strasse")).toEqual(["strasse", "strasse", "strasse"]);
  expect(tokenize("ΟΔΟΣ οδος")).toEqual(["οδοσ", "οδοσ"]);
  expect(tokenize("Café CAFE ＣＡＦＥ")).toEqual(["cafe", "cafe", "cafe"]);
});

test("index terms: the plain ASCII path (stemAscii) gives exactly tokenize's words stemmed by stemText", () => {
  let seed = 20261129;
  const rand = () => {
    seed = (seed * 1103515245 + 12345) & 0x7fffffff;
    return seed / 0x7fffffff;
  };
  const pieces = [
    "Running",
    "paintings",
    "the",
    "THE",
    "and",
    "der",
    "und",
    "Straße",
    "le",
    "dans",
    "chantait",
    "Berlin",
    "stamps",
    "album",
    "bravo",
    "42",
    "x".repeat(70),
    "Y".repeat(65),
    " ",
    "  ",
    ".",
    ", ",
    "!",
    "-",
    "'",
    "_",
    "\n",
  ];
  const slow = (text: string) => {
    const words = tokenize(text);
    stemText(words);
    return words;
  };
  for (let i = 0; i < 20000; i++) {
    const text = Array.from(
      { length: 1 + Math.floor(rand() * 10) },
      () => pieces[Math.floor(rand() * pieces.length)],
    ).join(" ");
    expect([text, indexTerms(text)]).toEqual([text, slow(text)]);
  }
});
