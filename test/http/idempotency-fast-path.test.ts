// @targets lmdb postgres
// An Idempotency-Key does not take a raw store off its direct route (src/http/direct.ts): the
// route serves it, keeps its answer in the store's own transaction, replays a repeat and refuses
// the key for another request, all without handing anything to the app. So clients send a key on
// every write at no cost to the fast path.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { directRoutes } from "../../src/http/direct";
import { rootKeyFromSecret } from "../../src/keys/service";
import { createLogger } from "../../src/log";
import { directStore } from "../../src/memory/index";
import { rootSecret, startTestServer, type TestServer } from "../helpers";

let s: TestServer;
beforeAll(async () => {
  s = await startTestServer();
});
afterAll(() => s?.stop());

test("a raw store with an Idempotency-Key is served, replayed and refused on the direct route", async () => {
  const root = rootKeyFromSecret(rootSecret);
  const handedToApp: string[] = [];
  const finished: number[] = [];
  const routes = directRoutes(
    [directStore(s.server.core)],
    {
      logger: createLogger("error", () => {}),
      authenticate: () => root,
      finish: (_r, _p, status) => finished.push(status),
    },
    async (request) => {
      handedToApp.push(await request.text());
      return new Response("app", { status: 599 });
    },
  );
  const post = (body: object, key: string) =>
    routes["/v1/memory"].POST(
      new Request(`${s.url}/v1/memory`, {
        method: "POST",
        body: JSON.stringify(body),
        headers: { "content-type": "application/json", "idempotency-key": key },
      }),
    );
  const body = { namespace: "fast-keys", entity: "u", content: "likes tea", infer: false };
  const first = await post(body, "k-1");
  expect(first.status).toBe(200);
  const stored = await first.json();
  const again = await post(body, "k-1");
  expect(again.status).toBe(200);
  expect(again.headers.get("idempotent-replayed")).toBe("true");
  expect(await again.json()).toEqual(stored);
  const reused = await post({ ...body, content: "likes coffee" }, "k-1");
  expect(reused.status).toBe(422);
  expect(((await reused.json()) as { error: { code: string } }).error.code).toBe("idempotency_key_reused");
  // A keyed fact too (stored verbatim, so on this route).
  expect((await post({ ...body, key: "drink", content: "tea" }, "k-2")).status).toBe(200);
  expect(handedToApp).toEqual([]);
  expect(finished).toEqual([200, 200, 422, 200]);
  // One memory for the two sends of k-1, and its events: one ADD.
  const events = (await s.json("GET", "/v1/memory/events?namespace=fast-keys&limit=10")).body;
  expect(events.filter((e: { newContent: string }) => e.newContent === "likes tea")).toHaveLength(1);
});
