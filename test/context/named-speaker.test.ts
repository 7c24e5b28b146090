// @targets lmdb postgres binary
// A question that names a person brings that person's own turns into the context block: in a
// conversation stored as "Name: text", what Tim said about himself says "I", not "Tim".
import { afterAll, beforeAll, expect, test } from "bun:test";
import { favourNamedSpeakers } from "../../src/context/speakers";
import type { Scored } from "../../src/storage/storage";
import { startTestServer, type TestServer } from "../helpers";

let t: TestServer;
beforeAll(async () => {
  t = await startTestServer({ env: { MEMD_EMBEDDER: "none" } });
});
afterAll(async () => {
  await t.stop();
});

// A conversation of three, each with as many turns (so no name is a rare word). John talks about
// books a lot, in short turns; Tim mentions his once, in a long one; Ann's turns share no word.
const johns = [
  "John: A book, a good book.",
  "John: Books! I read a book.",
  "John: That book I read was fun.",
  "John: Read the book, then another book.",
  "John: My book club read a book.",
  "John: Book fair next week, books galore.",
  "John: I read the book twice.",
  "John: The library book was late.",
  "John: Reading my book now.",
  "John: Lent a book to Sam, never read it.",
];
const anns = ["sunny", "windy", "cold", "warm", "rainy", "foggy", "humid", "stormy", "clear", "snowy"];
const garden = ["roses", "tulips", "the hedge", "the lawn", "the pond", "the shed", "the fence", "the apple tree"];
const tims =
  "Tim: I finally read a book on the train, a long fantasy about a wizard school, a dragon that guards a lake and the village that lives beside it.";
const turns = [
  ...johns.flatMap((j, i) => [j, `Ann: It is ${anns[i]} outside.`]),
  ...garden.flatMap((g, i) => [`Tim: I spent the morning on ${g} in the garden.`, `Ann: Day ${i + 1} of the trip.`]),
  tims,
];

beforeAll(async () => {
  for (const content of turns) {
    const r = await t.json("POST", "/v1/memory", { namespace: "cx-speaker", entity: "chat", content, infer: false });
    expect(r.status).toBe(200);
  }
});

const block = async (query: string) => {
  const r = await t.json("POST", "/v1/memory/context", {
    namespace: "cx-speaker",
    entity: "chat",
    query,
    maxTokens: 130,
  });
  expect(r.status).toBe(200);
  return r.body.memories.map((m: { content: string }) => m.content) as string[];
};

test("the named person's turn is in a block too small for every match", async () => {
  // Keyword alone ranks John's short turns above Tim's long one: the block holds John's only
  // when nobody is named...
  const anyone = await block("What book did they read?");
  expect(anyone.length).toBeGreaterThanOrEqual(6);
  expect(anyone).not.toContain(tims);
  // ...and Tim's turn when the question names him, after the best five (kept in their places).
  const timsBlock = await block("What book did Tim read?");
  expect(timsBlock).toContain(tims);
  expect(timsBlock.slice(0, 5).every((c) => c.startsWith("John: "))).toBe(true);
  // Naming both speakers favours neither: the block is keyword's.
  expect(await block("What books did Tim and John read?")).not.toContain(tims);
});

test("as of now, the block is the same", async () => {
  const r = await t.json("POST", "/v1/memory/context", {
    namespace: "cx-speaker",
    entity: "chat",
    query: "What book did Tim read?",
    maxTokens: 130,
    asOf: new Date().toISOString(),
  });
  expect(r.status).toBe(200);
  expect(r.body.memories.map((m: { content: string }) => m.content)).toEqual(await block("What book did Tim read?"));
});

test("a name in a script without case is found inside the question's run of characters", () => {
  const hit = (content: string, score: number) => ({ memory: { id: content, content }, score }) as unknown as Scored;
  const hits = [
    hit("李雷: 我喜欢茶", 3),
    hit("韩梅梅: 我喜欢咖啡", 2),
    hit("李雷: 我去过北京", 1.5),
    hit("韩梅梅: 好", 1),
  ];
  const order = (query: string) => favourNamedSpeakers(hits, query, 1).map((h) => h.memory.content);
  expect(order("李雷喜欢什么?")).toEqual(["李雷: 我喜欢茶", "李雷: 我去过北京", "韩梅梅: 我喜欢咖啡", "韩梅梅: 好"]);
  expect(order("他们喜欢什么?")).toEqual(hits.map((h) => h.memory.content));
});
