// @targets lmdb postgres binary
// Hybrid search over HTTP on a small fixed labelled set where keyword search alone misses a
// paraphrase and semantic search alone (the fake embedder, a bag of words with synonym groups)
// misses a name buried under similar memories: hybrid finds every memory that either finds, at
// the same cut. Then the embedding model's probe share (src/search/probe.ts): a lexical model
// (the bench's fake, a hashed bag of words with trigrams) never reorders what keyword found, a
// model that ranks the probes' paraphrases right does, and the probe texts ride along with the
// first hybrid search's query, in one call.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { PROBES } from "../../src/search/probe";
import { type FakeEmbedder, startFakeEmbedder } from "../fake-embedder";
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

describe("the embedding model's probe share", () => {
  // Dialogue lines: the lexical fake ranks them by shared names and word pieces, not by meaning.
  const lines = [
    "Anna: I went to the adoption agency on Friday, they were kind",
    "Anna: Anna here, Anna again, hi Ben",
    "Ben: Anna, the agency called about the adoption papers",
    "Ben: I painted a lake at sunrise last summer",
    "Ben: Ben loves summer, Ben says summer is the best",
    "Anna: my guitar lives in the hallway closet",
    "Anna: Anna played the guitar for Ben and Anna's friends",
    "Ben: did you go anywhere last summer, Anna?",
    "Anna: the painting class was fun, we painted flowers",
    "Ben: Anna, did you keep the old photos?",
    "Anna: I keep thinking about the kids I met",
    "Ben: the adoption process takes so long",
    "Anna: went camping with friends, so fun",
    "Ben: our dog loves the park",
    "Anna: I'm reading a new book about hope",
    "Ben: we went to the beach with the kids",
    "Anna: the support group meets on Tuesdays",
    "Ben: pottery class is my favourite thing",
    "Anna: my mom gave me that necklace",
    "Ben: the kids made me a card for my birthday",
    "Anna: I ran a charity race for mental health",
    "Ben: violin lessons start next week",
  ];
  const queries = [
    "When did Anna go to the adoption agency?",
    "What did Ben paint last summer?",
    "Where does Anna keep her guitar?",
  ];
  // A fake that passes every probe: the words of each probe's anchor and paraphrase made one word
  // (leaving out those of more than one probe, such as "her"; no trigrams, which the distractor
  // would share).
  const probeWords = PROBES.map(([anchor, paraphrase]) => [
    ...new Set(`${anchor} ${paraphrase}`.toLowerCase().match(/[\p{L}\p{N}']+/gu)),
  ]);
  const probeGroups = probeWords.map((words) =>
    words.filter((w) => probeWords.filter((other) => other.includes(w)).length === 1),
  );
  const servers: Record<"lexical" | "meaning", { embedder: FakeEmbedder; t: TestServer }> = {} as never;

  beforeAll(async () => {
    for (const kind of ["lexical", "meaning"] as const) {
      const embedder = startFakeEmbedder(
        kind === "lexical" ? { dimensions: 256, trigrams: true } : { dimensions: 256, similar: probeGroups },
      );
      const s = await startTestServer({
        env: { MEMD_EMBED_BASE_URL: embedder.url, MEMD_EMBED_MODEL: kind, MEMD_EMBED_TIMEOUT_MS: "5000" },
      });
      servers[kind] = { embedder, t: s };
      for (const content of lines) {
        const r = await s.json("POST", "/v1/memory", { namespace: "probe", entity: "u", content, infer: false });
        expect(r.status).toBe(200);
      }
    }
  });
  afterAll(async () => {
    for (const { embedder, t: s } of Object.values(servers)) {
      await s.stop();
      await embedder.stop();
    }
  });

  const ranked = async (s: TestServer, query: string, mode: string, limit: number) => {
    const r = await s.json("POST", "/v1/memory/search", { namespace: "probe", entity: "u", query, mode, limit });
    expect(r.status).toBe(200);
    expect(r.body.mode).toBe(mode);
    return { contents: r.body.results.map((m: { content: string }) => m.content) as string[], headers: r.headers };
  };

  test("the first hybrid search embeds the probe texts with its query, in one call; later ones the query alone", async () => {
    const { embedder, t: s } = servers.lexical;
    embedder.reset();
    const first = await ranked(s, queries[0], "hybrid", 10);
    expect(first.headers.get("x-memd-embed-calls")).toBe("1");
    expect(embedder.inputs).toEqual([[queries[0], ...PROBES.flat()]]);
    embedder.reset();
    await ranked(s, queries[1], "hybrid", 10);
    expect(embedder.inputs).toEqual([[queries[1]]]);
  });

  test("each server logs its model's probe share: 0 of 16 for the lexical fake, 16 of 16 for the other", async () => {
    for (const [kind, right] of [
      ["lexical", "0 of 16"],
      ["meaning", "16 of 16"],
    ] as const) {
      const s = servers[kind].t;
      await ranked(s, queries[2], "hybrid", 10);
      await s.settleLogs();
      const probed = s.logs.filter((l) => l.includes("embedding model probed for hybrid search"));
      expect(probed.length).toBe(1);
      expect(JSON.parse(probed[0])).toMatchObject({ model: kind, paraphrasesRankedRight: right });
    }
  });

  test("a lexical model never reorders what keyword found, though its own ranking differs", async () => {
    const s = servers.lexical.t;
    let semanticDisagrees = false;
    for (const query of queries) {
      const keyword = (await ranked(s, query, "keyword", 30)).contents;
      const semantic = (await ranked(s, query, "semantic", 10)).contents;
      const hybrid = (await ranked(s, query, "hybrid", 10)).contents;
      const inHybrid = keyword.filter((c) => hybrid.includes(c));
      expect(hybrid.filter((c) => keyword.includes(c))).toEqual(inHybrid);
      expect(hybrid.slice(0, 5)).toEqual(keyword.slice(0, 5));
      const order = semantic.filter((c) => keyword.includes(c));
      if (order.join() !== keyword.filter((c) => order.includes(c)).join()) semanticDisagrees = true;
    }
    expect(semanticDisagrees).toBe(true);
  });

  test("a model that ranks the probes' paraphrases right may reorder them", async () => {
    const s = servers.meaning.t;
    let reordered = false;
    for (const query of queries) {
      const keyword = (await ranked(s, query, "keyword", 30)).contents;
      const hybrid = (await ranked(s, query, "hybrid", 10)).contents;
      const order = hybrid.filter((c) => keyword.includes(c));
      if (order.join() !== keyword.filter((c) => order.includes(c)).join()) reordered = true;
    }
    expect(reordered).toBe(true);
  });
});
