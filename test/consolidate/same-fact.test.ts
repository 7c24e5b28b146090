// The model-free merge rule of consolidation (consolidate/same-fact.ts): the same words up to
// case, punctuation, word order, stop words and inflection are one fact; a number, a date, a
// negation or a name apart never are. And on memd's labelled set (bench/consolidation-set.json):
// no false merge (the bar), most duplicates caught.
import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { factKey, groupSameFacts, sameFact } from "../../src/consolidate/same-fact";

const same = (a: string, b: string) => sameFact(factKey(a), factKey(b));

describe("same fact", () => {
  test.each([
    ["Alice likes green tea", "alice likes GREEN tea!"],
    ["Alice likes green tea", "Green tea: Alice likes it."],
    ["Alice likes green tea", "Alice liked the green tea"],
    ["Alice does not like tea", "Alice doesn't like tea"],
    ["Olivia speaks French and Spanish", "Olivia speaks Spanish and French"],
    ["Prefers window seats", "prefer window seats"],
    ["Works as a nurse", "Worked as a nurse"],
    ["Plays the guitar", "Played the guitar"],
    ["Meeting on 2024-05-01", "meeting on 2024-05-01."],
  ])("%p and %p are one fact", (a, b) => expect(same(a, b)).toBe(true));

  test.each([
    ["Bob has 2 cats", "Bob has 3 cats"],
    ["Jack drinks two coffees a day", "Jack drinks three coffees a day"],
    ["Met Tom on May 3", "Met Tom on June 3"],
    ["Meeting on 2024-05-01", "Meeting on 2024-05-02"],
    ["Alice likes tea", "Alice doesn't like tea"],
    ["Can swim", "Cannot swim"],
    ["Works with William", "Works with Williams"],
    ["Alice likes tea", "Alicia likes tea"],
    ["Drinks coffee before work", "Drinks coffee after work"],
    ["Appointment on 2025-03-04", "Appointment on 2025-04-03"],
    ["Born on 04/03/1990", "Born on 03/04/1990"],
    ["Flight at 10:05", "Flight at 05:10"],
    ["Uses version 1.5", "Uses version 5.1"],
    ["The freezer is at -5 degrees", "The freezer is at 5 degrees"],
  ])("%p and %p are never merged", (a, b) => expect(same(a, b)).toBe(false));

  test("groups are cliques, in the order given; singletons are left out", () => {
    const groups = groupSameFacts(["b likes tea", "x", "B likes tea.", "tea, b liked"], (t) => t);
    expect(groups).toEqual([["b likes tea", "B likes tea.", "tea, b liked"]]);
  });

  test("the labelled set: no false merge, and at least 85% of the duplicates caught", async () => {
    const { pairs } = (await Bun.file(join(import.meta.dir, "../../bench/consolidation-set.json")).json()) as {
      pairs: { a: string; b: string; same: boolean }[];
    };
    expect(pairs.length).toBeGreaterThanOrEqual(200);
    const falseMerges = pairs.filter((p) => !p.same && same(p.a, p.b));
    expect(falseMerges).toEqual([]);
    const positives = pairs.filter((p) => p.same);
    expect(positives.filter((p) => same(p.a, p.b)).length / positives.length).toBeGreaterThanOrEqual(0.85);
  });
});
