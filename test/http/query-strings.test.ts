// @targets lmdb postgres binary
// Query strings: a percent escape that is not UTF-8, a control character or a repeated
// parameter is a 400 naming the parameter; a valid escape is read as the name it encodes.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { startTestServer, type TestServer } from "../helpers";

let s: TestServer;
beforeAll(async () => (s = await startTestServer()));
afterAll(() => s.stop());
const store = { namespace: "op", entity: "e", content: "fact", infer: false };

test.each([
  ["/v1/memory?namespace=%FF%FE", "namespace"],
  ["/v1/memory?namespace=a%80", "namespace"],
  ["/v1/memory?namespace=%C3%28", "namespace"],
  ["/v1/memory/events?namespace=op&entity=%E0%A4", "entity"],
  ["/v1/memory?namespace=a%01b", "namespace"],
  ["/v1/memory?namespace=a%C2%85b", "namespace"],
  ["/v1/memory?namespace=a&namespace=b", "namespace"],
  ["/v1/memory/events?namespace=op&limit=1&limit=2", "limit"],
])("GET %s: 400 naming %s", async (path, field) => {
  const r = await s.json("GET", path);
  expect(r.status).toBe(400);
  expect(r.body.error.details.map((d: { field: string }) => d.field)).toEqual([field]);
});

test("a valid escape is read as the name it encodes", async () => {
  expect((await s.json("POST", "/v1/memory", { ...store, namespace: "café" })).status).toBe(200);
  const r = await s.json("GET", "/v1/memory?namespace=caf%C3%A9");
  expect(r.body.memories.map((m: { namespace: string }) => m.namespace)).toEqual(["café"]);
});
