// @targets lmdb postgres binary
// One tag rule for every door (docs/api.md): 1 to 64 characters, no control characters, not
// blank. A store, an edit, an import line, and the tag filters of GET /v1/memory and of search all
// refuse the same tags and take the same ones, so a filter can never name a tag a store refused.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { lineCheckers } from "../../src/transfer/model";
import { startTestServer, type TestServer } from "../helpers";

let s: TestServer;
let id: string;
beforeAll(async () => {
  s = await startTestServer();
  const r = await s.json("POST", "/v1/memory", {
    namespace: "tags",
    entity: "e",
    content: "Likes green tea",
    infer: false,
    tags: ["green tea", "x".repeat(64)],
  });
  expect(r.status).toBe(200);
  id = r.body.memories[0].id;
});
afterAll(() => s.stop());

const refused = [" ", "\t \u3000", "", "x".repeat(65), "a\u0007b"];
const words = "must be a string of 1 to 64 characters, not blank, without control characters";

/** The five doors, each given one tag; the status and the field the answer names. */
const doors: Record<string, (tag: string) => Promise<{ status: number; field?: string }>> = {
  store: async (tag) => {
    const r = await s.json("POST", "/v1/memory", {
      namespace: "tags",
      entity: "e",
      content: "c",
      infer: false,
      tags: [tag],
    });
    return { status: r.status, field: r.body.error?.details?.[0]?.field };
  },
  edit: async (tag) => {
    const r = await s.json("PATCH", `/v1/memory/${id}`, { tags: [tag] });
    return { status: r.status, field: r.body.error?.details?.[0]?.field };
  },
  list: async (tag) => {
    const r = await s.json("GET", `/v1/memory?namespace=tags&tag=${encodeURIComponent(tag)}`);
    // Elysia reports no path for a failed list in a query string (http/error-handler.ts): the
    // answer names "(request)" then; the parameter itself is named when the query parser refuses.
    const field = r.body.error?.details?.[0]?.field;
    return { status: r.status, field: field === "(request)" ? "tag" : field };
  },
  search: async (tag) => {
    const r = await s.json("POST", "/v1/memory/search", { namespace: "tags", query: "tea", tags: [tag] });
    return { status: r.status, field: r.body.error?.details?.[0]?.field };
  },
  import: async (tag) => {
    const line = {
      type: "memory",
      id: "0190a4c6-8e6f-7b1c-9a2d-3f4e5d6c7b8a",
      namespace: "tags",
      entity: "e",
      content: "c",
      category: "fact",
      importance: 0.5,
      tags: [tag],
      createdAt: 1,
      updatedAt: 1,
      state: "current",
    };
    return lineCheckers.memory.Check(line) ? { status: 200 } : { status: 400, field: "tags" };
  },
};

test.each(Object.keys(doors))("%s refuses a blank, empty, long or control-character tag", async (door) => {
  for (const tag of refused) {
    const r = await doors[door](tag);
    expect(`${JSON.stringify(tag)}: ${r.status} ${r.field}`).toMatch(/: 400 tags?(\[\d+\])?$/);
  }
});

test.each(Object.keys(doors))("%s takes a tag of 64 characters and one with spaces inside", async (door) => {
  for (const tag of ["x".repeat(64), "green tea"]) expect((await doors[door](tag)).status).toBe(200);
});

test("the refusal says the rule in words; the filters find the tags the store took", async () => {
  const r = await s.json("POST", "/v1/memory/search", { namespace: "tags", query: "tea", tags: [" "] });
  expect(r.body.error.details).toEqual([{ field: "tags[0]", message: words }]);
  const list = await s.json("GET", `/v1/memory?namespace=tags&tag=${encodeURIComponent("green tea")}`);
  expect(list.body.memories.map((m: { id: string }) => m.id)).toContain(id);
});
