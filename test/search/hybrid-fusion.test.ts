// @targets lmdb postgres binary
// Hybrid search over HTTP on a small fixed labelled set where keyword search alone misses a
// paraphrase and semantic search alone (the fake embedder, a bag of words with synonym groups)
// misses a name buried under similar memories: hybrid finds every memory that either finds, at
// the same cut.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { startFakeEmbedder } from "../fake-embedder";
import { startTestServer, type TestServer } from "../helpers";

const embedder = startFakeEmbedder({
  dimensions: 256,
  similar: [
    ["cat", "kitten", "kitty"],
    ["vegetarian", "meat", "animals"],
  ],
});
let t: TestServer;
const ids = new Map<string, string>();

const memories = [
  "Owns a cat called Luna who sleeps all day on the sofa by the window",
  "Loves kittens",
  "Feeds kittens",
  "Kitten videos",
  "Adopted kittens",
  "Kittens everywhere",
  "Has kitty",
  "Kitten food",
  "Pets kitten",
  "Kitten toys",
  "Draws kittens",
  "Never eats meat or animals",
  "Plays the piano every evening",
  "Works as a nurse at night",
  "Drives an old red Volvo",
  "Speaks fluent Portuguese",
  "Runs a marathon every autumn",
  "Is allergic to peanuts",
  "Travels to Japan every spring",
  "Reads detective novels",
  "Has two daughters in primary school",
  "Takes care of an elderly mother",
  "Uses a Linux laptop",
  "Prefers green tea over coffee",
  "Swims laps at the pool before work",
];
/** Query, the memory it should find. */
const labelled: [string, string][] = [
  ["Luna the cat", memories[0]], // semantic alone ranks ten kitten memories above it
  ["is the user vegetarian?", memories[11]], // keyword alone: no shared word
  ["piano in the evening", memories[12]], // both
  ["red Volvo", memories[14]], // both
];

beforeAll(async () => {
  t = await startTestServer({
    env: { MEMD_EMBED_BASE_URL: embedder.url, MEMD_EMBED_MODEL: "fake", MEMD_EMBED_TIMEOUT_MS: "5000" },
  });
  for (const content of memories) {
    const r = await t.json("POST", "/v1/memory", { namespace: "fusion", entity: "u", content, infer: false });
    expect(r.status).toBe(200);
    ids.set(content, r.body.memories[0].id);
  }
});
afterAll(async () => {
  await t.stop();
  await embedder.stop();
});

async function found(mode: string, query: string, limit: number): Promise<string[]> {
  const r = await t.json("POST", "/v1/memory/search", { namespace: "fusion", entity: "u", query, mode, limit });
  expect(r.status).toBe(200);
  expect(r.body.mode).toBe(mode);
  const scores = r.body.results.map((m: { score: number }) => m.score);
  expect(scores).toEqual([...scores].sort((a: number, b: number) => b - a));
  return r.body.results.map((m: { content: string }) => m.content);
}

test("keyword alone and semantic alone each miss one; hybrid finds all, at 1, 3 and 5", async () => {
  for (const limit of [1, 3, 5]) {
    const hits: Record<string, boolean[]> = {};
    for (const mode of ["keyword", "semantic", "hybrid"])
      hits[mode] = await Promise.all(labelled.map(async ([q, want]) => (await found(mode, q, limit)).includes(want)));
    if (limit === 5) {
      expect(hits.keyword).toEqual([true, false, true, true]);
      expect(hits.semantic).toEqual([false, true, true, true]);
    }
    expect(hits.hybrid).toEqual([true, true, true, true]);
  }
});

test("a strong keyword match leads even when semantic search ranks it low", async () => {
  expect((await found("hybrid", "Luna the cat", 3))[0]).toBe(memories[0]);
  expect((await found("semantic", "Luna the cat", 10)).includes(memories[0])).toBe(false);
});
