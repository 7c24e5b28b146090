// @targets lmdb postgres binary
// With no embedding endpoint configured, memd embeds with its built-in embedder (a distilled
// static table, src/embedding/static-embedder.ts): a plain question finds a memory that shares no
// word with it, in search, in the context block and through mem0's routes; --embedder none is
// keyword search as before.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { runMemd, startTestServer, type TestServer, testBinary } from "../helpers";

let t: TestServer;
let none: TestServer;
beforeAll(async () => {
  t = await startTestServer();
  none = await startTestServer({ args: ["--embedder", "none"] });
});
afterAll(async () => {
  await t.stop();
  await none.stop();
});

const facts = [
  "I prefer green tea",
  "I moved to Lisbon.",
  "I work as a nurse.",
  "My dog is called Max",
  "Meeting with the dentist on Friday at 10",
];

async function seed(s: TestServer, namespace: string) {
  for (const content of facts) {
    const r = await s.json("POST", "/v1/memory", { namespace, entity: "alice", content, infer: false });
    expect(r.status).toBe(200);
  }
  await embedded(s);
}

/**
 * Waits (bounded) until the server has embedded every memory stored so far. A search waits for
 * the built-in embedder's backlog for at most a second (src/embedding/worker.ts catchUp): under
 * heavy load its first search could answer before the memories just stored had their vectors, and
 * the tests of what ranks first are not about that (the one that is comes after them).
 */
async function embedded(s: TestServer) {
  for (let i = 0; ; i++) {
    const m = await (await s.api("GET", "/metrics")).text();
    if (Number(/^memd_embed_pending (\d+)$/m.exec(m)?.[1]) === 0) return;
    if (i === 600) throw new Error("the stored memories were not embedded within 30 s");
    await Bun.sleep(50);
  }
}

const search = (s: TestServer, namespace: string, query: string, extra: object = {}) =>
  s.json("POST", "/v1/memory/search", { namespace, entity: "alice", query, limit: 3, ...extra });

describe("the built-in embedder (the default)", () => {
  beforeAll(() => seed(t, "plain"));

  test.each([
    ["what does alice drink?", "I prefer green tea"],
    ["where does the user live", "I moved to Lisbon."],
    ["what is her job?", "I work as a nurse."],
    ["does she have pets?", "My dog is called Max"],
  ])("%p finds %p first, in hybrid mode, with no word in common", async (query, memory) => {
    const r = await search(t, "plain", query);
    expect(r.status).toBe(200);
    expect(r.body.mode).toBe("hybrid");
    expect(r.body.results[0].content).toBe(memory);
    // Embedded in this process: no embedding call.
    expect(r.headers.get("x-memd-embed-calls")).toBe("0");
  });

  // Plain questions over a few facts of one entity, none sharing a word with its answer but
  // "the"-like ones. The first is the lead's check of the last stop's binary ("where does the
  // user live" ranked the dog first); the others were written after the fix, not tuned on (two
  // of them rank their fact second and fourth: "what is the user's occupation?" finds the move
  // to Berlin first).
  const plain: { facts: string[]; asks: [query: string, answer: string][] }[] = [
    {
      facts: [
        "I moved to Lisbon.",
        "Prefers tea over coffee",
        "I prefer green tea",
        "Works as a nurse at the city hospital.",
        "Has a dog named Rex.",
      ],
      asks: [
        ["where does the user live", "I moved to Lisbon."],
        ["what is the user's job?", "Works as a nurse at the city hospital."],
        ["does the user have pets?", "Has a dog named Rex."],
      ],
    },
    {
      facts: [
        "I relocated to Berlin last year.",
        "I only drink oolong tea.",
        "I am a software engineer at a bank.",
        "We adopted a cat called Miso.",
        "I run five kilometres every morning.",
      ],
      asks: [
        ["where does the user live now?", "I relocated to Berlin last year."],
        ["what beverage does the user like?", "I only drink oolong tea."],
        ["what is the user's occupation?", "I am a software engineer at a bank."],
        ["does the user have pets?", "We adopted a cat called Miso."],
        ["how does the user exercise?", "I run five kilometres every morning."],
      ],
    },
    {
      facts: [
        "Grew up in Manila.",
        "Allergic to shellfish.",
        "Her brother is a pilot.",
        "Owns a red bicycle.",
        "Speaks fluent Japanese.",
      ],
      asks: [
        ["where is the user from?", "Grew up in Manila."],
        ["what can't the user eat?", "Allergic to shellfish."],
        ["what does the user's sibling do for work?", "Her brother is a pilot."],
        ["which languages does the user know?", "Speaks fluent Japanese."],
      ],
    },
  ];
  test("plain questions over a few facts find their fact: the lead's check first, most others first", async () => {
    // Where each answer ranks (limit 5), by group.
    const ranks: number[][] = [];
    for (const [i, g] of plain.entries()) {
      const ns = `plain-${i}`;
      for (const content of g.facts)
        expect((await t.json("POST", "/v1/memory", { namespace: ns, entity: "u", content, infer: false })).status).toBe(
          200,
        );
      await embedded(t);
      const r: number[] = [];
      for (const [query, answer] of g.asks) {
        const res = await t.json("POST", "/v1/memory/search", { namespace: ns, entity: "u", query, limit: 5 });
        expect(res.status).toBe(200);
        expect(res.body.mode).toBe("hybrid");
        r.push(res.body.results.map((m: { content: string }) => m.content).indexOf(answer));
      }
      ranks.push(r);
    }
    // The last stop's code: 7 of 12 first ("where does the user live": the dog first); now 10.
    expect(ranks[0]).toEqual([0, 0, 0]);
    expect(ranks.flat().filter((r) => r === 0).length).toBeGreaterThanOrEqual(10);
    expect(ranks.flat().every((r) => r >= 0)).toBe(true);
  });

  test("a memory is found by its meaning in the very next request after its store", async () => {
    for (let i = 0; i < 5; i++) {
      const ns = `next-${i}`;
      const stored = await t.json("POST", "/v1/memory", {
        namespace: ns,
        entity: "alice",
        content: "I prefer green tea",
        infer: false,
      });
      expect(stored.status).toBe(200);
      const r = await search(t, ns, "what does alice drink?", { mode: "semantic" });
      expect(r.body.results.map((m: { content: string }) => m.content)).toEqual(["I prefer green tea"]);
    }
  });

  test("the context block for a question holds the memories that answer it, not the ones sharing a stop word", async () => {
    const ns = "ctx";
    // (Lisbon first: the context also places the memories stored right before and after a hit.)
    for (const content of ["I moved to Lisbon.", "I work as a nurse.", "Prefers tea over coffee"])
      expect((await t.json("POST", "/v1/memory", { namespace: ns, entity: "u", content, infer: false })).status).toBe(
        200,
      );
    await embedded(t);
    const r = await t.json("POST", "/v1/memory/context", { namespace: ns, entity: "u", query: "what to drink" });
    expect(r.status).toBe(200);
    expect(r.body.mode).toBe("hybrid");
    expect(r.body.context).toContain("Prefers tea over coffee");
    expect(r.body.context).not.toContain("Lisbon");
  });

  test("the hybrid block keeps what the keyword block holds: a keyword hit sharing only stop words, next to a strong hit", async () => {
    const ns = "ctx-kept";
    const turns = [
      "Books have such power. Which one is your favourite?",
      'I loved "Becoming Nicole" by Amy Ellis Nutt, a true story.',
      "What did you take away from it?",
      "It taught me self-acceptance and how to find support.",
      "We went camping by the lake last summer.",
      "My kids loved the dinosaur exhibit at the museum.",
      "I signed up for a pottery class on Saturdays.",
      "The violin concert in the park was wonderful.",
    ];
    for (const s of [t, none])
      for (const content of turns)
        expect((await s.json("POST", "/v1/memory", { namespace: ns, entity: "u", content, infer: false })).status).toBe(
          200,
        );
    await embedded(t);
    const query = 'What did she take away from the book "Becoming Nicole"?';
    const blocks = await Promise.all(
      [t, none].map((s) => s.json("POST", "/v1/memory/context", { namespace: ns, entity: "u", query })),
    );
    expect(blocks.map((r) => r.body.mode)).toEqual(["hybrid", "keyword"]);
    for (const r of blocks) {
      expect(r.body.context).toContain("Becoming Nicole");
      expect(r.body.context).toContain("What did you take away from it?");
    }
  });

  test("docs/mem0.md's example: mem0's add, then search for what alice drinks", async () => {
    const mem0 = async (path: string, body: unknown) => {
      const res = await t.api("POST", path, body, {
        headers: { "content-type": "application/json", "x-memd-namespace": "mem0-docs" },
      });
      expect(res.status).toBe(200);
      return (await res.json()) as { results: { memory: string }[] };
    };
    for (const content of ["I prefer green tea", "I moved to Lisbon"])
      await mem0("/v3/memories/add/", { messages: [{ role: "user", content }], user_id: "alice", infer: false });
    await embedded(t);
    const r = await mem0("/v3/memories/search/", { query: "what does alice drink?", filters: { user_id: "alice" } });
    expect(r.results[0].memory).toBe("I prefer green tea");
  });
});

/** The server's process: this one, or the binary's child (found by its data dir). */
function serverPid(s: TestServer): number {
  if (!testBinary) return process.pid;
  for (const pid of readdirSync("/proc").filter((d) => /^\d+$/.test(d)))
    try {
      if (readFileSync(`/proc/${pid}/cmdline`, "utf8").includes(s.dataDir)) return Number(pid);
    } catch {}
  throw new Error(`no process serves ${s.dataDir}`);
}

/** CPU time (clock ticks) of the process's threads named `name`, summed. */
function threadTicks(pid: number, name: string): number {
  let ticks = 0;
  for (const task of readdirSync(`/proc/${pid}/task`))
    try {
      if (readFileSync(`/proc/${pid}/task/${task}/comm`, "utf8").trim() !== name) continue;
      const f = readFileSync(`/proc/${pid}/task/${task}/stat`, "utf8").split(") ")[1].split(" ");
      ticks += Number(f[11]) + Number(f[12]);
    } catch {}
  return ticks;
}

test("stored memories are embedded on a thread of their own (a Worker), not on the one serving requests", async () => {
  const pid = serverPid(t);
  const before = threadTicks(pid, "Worker");
  // Long texts, so that embedding them takes a few hundred milliseconds of CPU.
  const n = 200;
  for (let i = 0; i < n; i++) {
    const content = `Note ${i}: ${Array.from({ length: 300 }, (_, j) => `word${(i * 7 + j) % 997}`).join(" ")}`;
    expect(
      (await t.json("POST", "/v1/memory", { namespace: "thread", entity: "e", content, infer: false })).status,
    ).toBe(200);
  }
  // Every one embedded: a semantic search answers only memories that have a vector.
  for (let i = 0; ; i++) {
    const r = await t.json("POST", "/v1/memory/search", {
      namespace: "thread",
      entity: "e",
      query: "note",
      mode: "semantic",
      limit: 100,
    });
    if (r.body.results.length === 100) break;
    if (i > 600) throw new Error("the stored memories were not embedded within 60 s");
    await Bun.sleep(100);
  }
  expect(threadTicks(pid, "Worker")).toBeGreaterThan(before);
});

describe("--embedder none", () => {
  beforeAll(() => seed(none, "plain"));

  test("keyword search as before: a question sharing no word finds nothing; semantic is refused", async () => {
    const r = await search(none, "plain", "what does alice drink?");
    expect(r.status).toBe(200);
    expect(r.body).toEqual({ results: [], mode: "keyword" });
    const words = await search(none, "plain", "green tea");
    expect(words.body.results.map((m: { content: string }) => m.content)).toEqual(["I prefer green tea"]);
    const semantic = await search(none, "plain", "what does alice drink?", { mode: "semantic" });
    expect(semantic.status).toBe(400);
    expect(semantic.body.error.message).toContain("--embedder none");
  });

  test("memd serve --help names the setting", async () => {
    const help = await runMemd(["serve", "--help"], { PATH: process.env.PATH });
    expect(help.out).toMatch(/--embedder\s.*MEMD_EMBEDDER/);
  });
});
