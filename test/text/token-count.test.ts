// countTokens (text/token-count.ts) sums remembered counts of tiktoken's pieces: it must agree
// with js-tiktoken's own encoding of the whole text, whatever the text.
import { expect, test } from "bun:test";
import { Tiktoken } from "js-tiktoken/lite";
import cl100k from "js-tiktoken/ranks/cl100k_base";
import { countTokens } from "../../src/text/token-count";
import { seededRandom } from "../helpers";

const enc = new Tiktoken(cl100k);

test("countTokens agrees with js-tiktoken's encoding of the whole text", () => {
  const rand = seededRandom(2121);
  const parts = [
    "a",
    "the",
    " ",
    "  ",
    "\n",
    "\n\n",
    " \n",
    "\t",
    "Café",
    "Straße",
    "烤鸭",
    "北京",
    "😀",
    "👩‍👩‍👧",
    "'s",
    "'re",
    "123",
    "4567",
    "1.5",
    "-",
    "## ",
    "- [2026-11-25] ",
    ".",
    "!?",
    "...",
    "<|endoftext|>",
    "<|fim_prefix|>",
    "don't",
    "Caroline",
    "LGBTQ",
    "ümlaut",
    "ñ",
    "\u0301",
    "\r\n",
    "  x",
    "—",
    "http://x.y/z?q=1",
  ];
  for (let i = 0; i < 2000; i++) {
    const n = 1 + Math.floor(rand() * 30);
    let text = "";
    for (let j = 0; j < n; j++) text += parts[Math.floor(rand() * parts.length)];
    expect(countTokens(text)).toBe(enc.encode(text, [], []).length);
  }
  expect(countTokens("")).toBe(0);
});
