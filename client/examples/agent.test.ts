// An agent's own test suite, with a real memd per test file: copy this file to start.
// Run it with `bun test`. In your project, `@memd/client` is the package; here it maps to ../src.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { MemdError } from "@memd/client";
import { type Memd, startMemd } from "@memd/client/testkit";

let memd: Memd;

beforeAll(async () => {
  // A throwaway server: temp data dir, free port, a fresh root key. The fake model answers smart
  // stores (infer: true) in order, the way a real model would decide what to remember.
  memd = await startMemd({
    model: [
      { operations: [{ fact: "User is vegetarian", decision: "ADD", category: "preference" }] },
      { operations: [{ fact: "User eats fish now", decision: "REPLACE", target: "m1", reason: "contradiction" }] },
    ],
  });
});

afterAll(() => memd.stop());

test("the agent remembers what the user says, and sees the change", async () => {
  const { client } = memd;
  const first = await client.store({ namespace: "demo", entity: "user-1", content: "I don't eat meat." });
  expect(first.memories.map((m) => m.content)).toEqual(["User is vegetarian"]);

  const since = new Date(Date.now() - 1).toISOString();
  // memd offers the model the existing memories that share words with the new content, as m1, m2, ...
  const second = await client.store({
    namespace: "demo",
    entity: "user-1",
    content: "I am no longer vegetarian, I eat fish now.",
  });
  expect(second.memories[0].event).toBe("REPLACE");

  // The diff tells the agent what changed since it last looked.
  const diff = await client.diff({ namespace: "demo", since });
  expect(diff.replaced.map((r) => [r.oldContent, r.newContent])).toEqual([
    ["User is vegetarian", "User eats fish now"],
  ]);

  const current = await client.list({ namespace: "demo", entity: "user-1" });
  expect(current.memories.map((m) => m.content)).toEqual(["User eats fish now"]);
  // The model was asked twice; what it was shown is there to assert on.
  expect(memd.modelRequests.length).toBe(2);
});

test("raw stores, the live stream, and errors", async () => {
  const { client } = memd;
  const seen: string[] = [];
  const abort = new AbortController();
  // The stream replays from `since`, then follows live; it reconnects by itself if the connection drops.
  const following = (async () => {
    for await (const { event } of client.stream({ namespace: "notes", since: "2000-01-01", signal: abort.signal })) {
      seen.push(event.newContent ?? "");
      if (seen.length === 3) abort.abort();
    }
  })();
  for (const content of ["one", "two", "three"])
    await client.store({ namespace: "notes", entity: "n", content, infer: false });
  await following;
  expect(seen).toEqual(["one", "two", "three"]);

  // Errors carry memd's status, code, message and field details.
  const err = await client.store({ namespace: "notes", entity: "n", content: " ", infer: false }).catch((e) => e);
  expect(err).toBeInstanceOf(MemdError);
  expect([err.status, err.code, err.details[0].field]).toEqual([400, "invalid_request", "content"]);
});
