// @targets lmdb postgres
// An as-of keyword search in two phases (score the texts of the moment, then read the records of
// the best only: AsOfReads.entityTextsAsOf, search/asof.ts keywordAsOfTexts) answers exactly what
// scoring every version does (keywordAsOf over entityAsOf), ties, filters and limits included, at
// every instant of a history with every state-changing kind and expiries, on both backends.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { keywordAsOf, keywordAsOfTexts } from "../../src/search/asof";
import { openStorage } from "../../src/storage/index";
import type { MemoryOp, Storage } from "../../src/storage/storage";
import { queryTerms } from "../../src/text/tokens";
import { backend, freshDatabase, tempDir } from "../helpers";

const tmp = tempDir("memd-asof-two-phase-");
let storage: Storage;
const instants: number[] = [];
const words = ["tea", "coffee", "Paris", "cello"];

beforeAll(async () => {
  storage = await openStorage(
    backend === "postgres" ? { dataDir: "", databaseUrl: await freshDatabase() } : { dataDir: tmp.dir },
  );
  const live: string[] = [];
  let x = 23;
  const rand = () => {
    x = (x * 1664525 + 1013904223) >>> 0;
    return x / 2 ** 32;
  };
  const create = (i: number) => ({
    id: Bun.randomUUIDv7(),
    namespace: "ns",
    entity: "u",
    // Many equal lengths and terms: many ties of score.
    content: `the user mentioned ${words[i % words.length]} ${i % 7}`,
    category: i % 3 === 0 ? "preference" : "general",
    importance: 0.5,
    tags: [words[(i + 1) % words.length]],
  });
  for (let i = 0; i < 240; i++) {
    const r = rand();
    let op: MemoryOp;
    if (live.length < 10 || r < 0.4) {
      const c = create(i);
      live.push(c.id);
      op = { event: "ADD", create: i % 25 === 0 ? { ...c, ttlSeconds: 1 } : c };
    } else {
      const k = Math.floor(rand() * live.length);
      if (r < 0.6) op = { event: "UPDATE", target: live[k], patch: { content: `updated ${words[i % 4]} ${i % 5}` } };
      else if (r < 0.75) op = { event: "MERGE", target: live[k], patch: { content: `merged ${words[i % 4]}` } };
      else if (r < 0.9) {
        const c = create(i);
        op = { event: "REPLACE", create: c, target: live[k], reason: "contradiction" };
        live[k] = c.id;
      } else {
        op = { event: "DELETE", target: live[k], reason: "deleted" };
        live.splice(k, 1);
      }
    }
    await storage.apply([op], null);
    const [e] = await storage.newestEvents({ namespace: "ns", entity: "u" }, 1);
    instants.push(e.atMs);
  }
}, 120_000);
afterAll(async () => {
  await storage.close();
  tmp.cleanup();
});

test("two phases answer what scoring every version does, at every instant", async () => {
  expect(storage.entityTextsAsOf).toBeDefined();
  const queries = ["tea mentioned", "coffee", "merged tea", "updated 3", "nothing here"];
  const filters = [{}, { tags: ["coffee"] }, { categories: ["preference"] }];
  let compared = 0;
  for (const asOf of instants.filter((_, i) => i % 3 === 0)) {
    const all = (await storage.entityAsOf({ namespace: "ns", entity: "u", asOf })).memories;
    for (const q of queries)
      for (const f of filters)
        for (const limit of [1, 5, 100]) {
          const texts = await storage.entityTextsAsOf!({ namespace: "ns", entity: "u", asOf });
          const two = await keywordAsOfTexts(texts, queryTerms(q), f, limit);
          expect(two).toEqual(keywordAsOf(all, queryTerms(q), f, limit));
          compared++;
        }
  }
  expect(compared).toBeGreaterThan(3000);
});
