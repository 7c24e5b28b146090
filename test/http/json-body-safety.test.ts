// @targets lmdb postgres binary
// JSON bodies a client can get wrong: keys that would reach an object's prototype are refused,
// naming their path; constructor and prototype inside metadata are data; DELETE takes no body.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { rootSecret, startTestServer, type TestServer } from "../helpers";

let s: TestServer;
beforeAll(async () => (s = await startTestServer()));
afterAll(() => s.stop());
const raw = (method: string, path: string, body?: string, headers: Record<string, string> = {}) =>
  fetch(s.url + path, {
    method,
    headers: { authorization: `Bearer ${rootSecret}`, "content-type": "application/json", ...headers },
    body,
  });
const store = { namespace: "op", entity: "e", content: "fact", infer: false };

test.each([
  [
    "__proto__ at the top",
    `{"namespace":"op","entity":"e","content":"c","infer":false,"__proto__":{"tags":["x"],"source":"y"}}`,
    "__proto__",
  ],
  [
    "constructor at the top",
    `{"namespace":"op","entity":"e","content":"c","infer":false,"constructor":{"a":1}}`,
    "constructor",
  ],
  ["prototype at the top", `{"namespace":"op","entity":"e","content":"c","infer":false,"prototype":1}`, "prototype"],
  [
    "__proto__ inside metadata",
    `{"namespace":"op","entity":"e","content":"c","infer":false,"metadata":{"__proto__":{"a":1}}}`,
    "metadata.__proto__",
  ],
  [
    "__proto__ deep inside metadata",
    `{"namespace":"op","entity":"e","content":"c","infer":false,"metadata":{"a":[{"__proto__":1}]}}`,
    "metadata.a[0].__proto__",
  ],
])("%s: 400 naming the path, nothing stored", async (_, body, field) => {
  const r = await raw("POST", "/v1/memory", body);
  expect(r.status).toBe(400);
  const b = (await r.json()) as { error: { code: string; details: { field: string }[] } };
  expect(b.error.code).toBe("invalid_request");
  expect(b.error.details.map((d) => d.field)).toEqual([field]);
});

test("constructor and prototype inside metadata round-trip exactly", async () => {
  const metadata = { constructor: { name: "x" }, prototype: [1, 2], nested: { constructor: "y" } };
  const r = await s.json("POST", "/v1/memory", { ...store, metadata });
  expect(r.status).toBe(200);
  expect(r.body.memories[0].metadata).toEqual(metadata);
  const again = await s.json("GET", `/v1/memory/${r.body.memories[0].id}`);
  expect(again.body.metadata).toEqual(metadata);
  expect(again.body.tags).toBeUndefined();
});

test.each([
  ["text/plain", "hello", { "content-type": "text/plain" }],
  ["nested JSON", `${"[".repeat(5000)}${"]".repeat(5000)}`, {}],
  ["an empty object", "{}", {}],
])("DELETE with a body (%s) is refused and deletes nothing", async (_, body, headers) => {
  const id = (await s.json("POST", "/v1/memory", store)).body.memories[0].id;
  const r = await raw("DELETE", `/v1/memory/${id}`, body, headers);
  expect(r.status).toBe(400);
  expect(((await r.json()) as { error: { code: string } }).error.code).toBe("invalid_request");
  expect((await s.json("GET", `/v1/memory/${id}`)).status).toBe(200);
});

test("DELETE /v1/memory/:id without a body answers 200 {deleted: true}", async () => {
  const id = (await s.json("POST", "/v1/memory", store)).body.memories[0].id;
  const r = await s.json("DELETE", `/v1/memory/${id}`);
  expect([r.status, r.body]).toEqual([200, { deleted: true }]);
});
