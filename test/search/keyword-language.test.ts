// @targets lmdb postgres binary
// Keyword search in many languages over HTTP: words match across inflections through the Snowball
// stemmer of the text's language, stop words weigh less but a query of stop words only still
// answers, and folding still joins Café and cafe, Straße and STRASSE, and CJK bigrams still
// find 烤鸭.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { startTestServer, type TestServer } from "../helpers";

let t: TestServer;
beforeAll(async () => {
  t = await startTestServer();
});
afterAll(async () => {
  await t.stop();
});

async function store(namespace: string, content: string): Promise<string> {
  const r = await t.json("POST", "/v1/memory", { namespace, entity: "u", content, infer: false });
  expect(r.status).toBe(200);
  return r.body.memories[0].id;
}
async function found(namespace: string, query: string): Promise<string[]> {
  const r = await t.json("POST", "/v1/memory/search", { namespace, entity: "u", query, mode: "keyword" });
  expect(r.status).toBe(200);
  return r.body.results.map((m: { content: string }) => m.content);
}

// Per language: a memory, a query that shares only inflected forms of its words (and stop words),
// and a distractor that shares only stop words with the query (at most two: a stop word weighs
// about a third of a word).
const languages: [string, string, string, string][] = [
  ["en", "She loves painting landscapes with her children", "who paints landscapes?", "Who is she with?"],
  ["de", "Er wohnt mit seinen Kindern in einem großen Haus", "wo sind die Häuser der Kinder?", "Wo sind die und der?"],
  ["fr", "Elle a travaillé comme chanteuse dans un café", "les chanteuses du café", "Les amis du quartier"],
  ["es", "Ella estaba corriendo por el parque con sus perros", "¿quién corre con el perro?", "¿Quién vive con el?"],
  ["it", "Lui ha mangiato la pizza con i suoi amici", "cosa mangia con gli amici?", "Cosa fa con gli altri?"],
  ["pt", "Ela gosta de cozinhar para os seus filhos", "quem cozinha para o filho?", "Quem vai para o mar?"],
  ["nl", "Hij gaat elke dag met de fietsen naar zijn werk", "wie heeft een fiets?", "Een boek, wie?"],
  ["sv", "Hon promenerar med hundarna varje morgon", "vem har en hund?", "En bil, vem?"],
  ["ru", "Она читает книги по вечерам", "какую книгу она читает?", "Она живет там"],
];

describe("stemming and stop words per language", () => {
  for (const [code, memory, query, distractor] of languages)
    test(`${code}: "${query}" finds "${memory}" first`, async () => {
      const ns = `lang-${code}`;
      await store(ns, memory);
      await store(ns, distractor);
      const got = await found(ns, query);
      expect(got[0]).toBe(memory);
    });

  test("an English word that is a stop word elsewhere does not change how its text ranks", async () => {
    // "bravo" is a French stop word: "Collects stamps, album bravo." was stemmed as French and
    // scored about twice its neighbours for "stamps".
    const ns = "lang-bravo";
    for (const w of ["alpha", "bravo", "delta"]) await store(ns, `Collects stamps, album ${w}.`);
    const r = await t.json("POST", "/v1/memory/search", {
      namespace: ns,
      entity: "u",
      query: "stamps",
      mode: "keyword",
    });
    expect(r.status).toBe(200);
    const scores = r.body.results.map((m: { score: number }) => m.score);
    expect(scores).toHaveLength(3);
    expect(Math.max(...scores) / Math.min(...scores)).toBeCloseTo(1, 6);
  });

  test("a query of stop words only still answers", async () => {
    await store("lang-stop", "She is who she is");
    await store("lang-stop", "Painting landscapes");
    expect(await found("lang-stop", "who is she?")).toEqual(["She is who she is"]);
  });

  test("a name that is also a stop word counts in full when written as a name", async () => {
    await store("lang-name", "Will moved to Berlin last spring");
    await store("lang-name", "They say it might rain, so take an umbrella to the park");
    // "will" and "may" are stop words; written capitalized inside the question they are a name and a month.
    expect((await found("lang-name", "Where did Will go in May?"))[0]).toBe("Will moved to Berlin last spring");
  });
});

describe("folding and CJK still find what they found", () => {
  test("Café, cafe and CAFÉ in any language", async () => {
    const memories = ["Wir treffen uns im Café", "Meet me at the cafe", "CAFÉ AU LAIT"];
    for (const m of memories) await store("fold-cafe", m);
    for (const q of ["Café", "cafe", "CAFÉ"])
      expect((await found("fold-cafe", q)).sort()).toEqual([...memories].sort());
  });

  test("Straße, strasse and STRASSE", async () => {
    const memories = ["Sie wohnt in der Straße am Park", "STRASSE 5", "The Strasse is long"];
    for (const m of memories) await store("fold-strasse", m);
    for (const q of ["Straße", "strasse", "STRASSE"])
      expect((await found("fold-strasse", q)).sort()).toEqual([...memories].sort());
  });

  test("烤鸭 by its bigram, 北京烤鸭 best where both occur", async () => {
    await store("cjk", "我喜欢吃北京烤鸭");
    await store("cjk", "烤鸭很好吃");
    await store("cjk", "我住在上海");
    expect((await found("cjk", "烤鸭")).sort()).toEqual(["我喜欢吃北京烤鸭", "烤鸭很好吃"].sort());
    expect((await found("cjk", "北京烤鸭"))[0]).toBe("我喜欢吃北京烤鸭");
  });
});
