// @targets lmdb
// On LMDB the built-in embedder's thread (a Worker) reads the pending memories and writes their
// vectors itself, on its own handle of the store, so the thread serving requests neither embeds
// nor writes them; it only has its in-memory vectors follow the keys written. (In-process only:
// the test watches the server's own storage object; the binary target runs the same code.)
import { afterAll, beforeAll, expect, test } from "bun:test";
import { startTestServer, type TestServer, untilNonePending } from "../helpers";

let t: TestServer;
beforeAll(async () => {
  t = await startTestServer();
});
afterAll(() => t.stop());

test("stored memories get their vectors from the embedding thread, not through the serving thread's setVectors", async () => {
  const storage = t.server.core.storage;
  let written = 0;
  const setVectors = storage.setVectors.bind(storage);
  storage.setVectors = (items) => {
    written += items.length;
    return setVectors(items);
  };
  const facts = ["I prefer green tea", "I moved to Lisbon.", "Works as a nurse at the city hospital."];
  for (let i = 0; i < 150; i++)
    expect(
      (
        await t.json("POST", "/v1/memory", {
          namespace: "w",
          entity: `e${i % 3}`,
          content: i < 3 ? facts[i] : `Note ${i}: the meeting about budget line ${i} moved to room ${i % 7}.`,
          infer: false,
        })
      ).status,
    ).toBe(200);
  // Found by meaning (the search waits for this server's backlog), in the serving thread's
  // in-memory vectors.
  for (const [i, query] of ["what does she drink?", "where does the user live", "what is her job?"].entries()) {
    const r = await t.json("POST", "/v1/memory/search", {
      namespace: "w",
      entity: `e${i}`,
      query,
      mode: "semantic",
      limit: 1,
    });
    expect(r.status).toBe(200);
    expect(r.body.results.map((m: { content: string }) => m.content)).toEqual([facts[i]]);
  }
  // Every memory embedded (waited for: a search waits on the backlog at most a second, which a
  // loaded machine can outlast), none through this thread.
  await untilNonePending(storage);
  expect(written).toBe(0);
});
