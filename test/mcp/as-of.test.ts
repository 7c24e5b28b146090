// @targets lmdb postgres
// The MCP tools recall and list_memories take as_of (the REST API's asOf), and remember takes
// observedAt: an agent can ask what was known about an entity at a past moment.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { runTool, ToolError, tools } from "../../src/mcp/tools";
import { rootSecret, startTestServer, type TestServer } from "../helpers";

let s: TestServer;
const tool = (name: string) => tools.find((t) => t.name === name)!;
const env = () => ({ fetch, authorization: `Bearer ${rootSecret}`, baseUrl: s.url });
let between = "";

beforeAll(async () => {
  s = await startTestServer();
  const remember = (content: string, extra: Record<string, unknown> = {}) =>
    runTool(tool("remember"), { namespace: "agent", entity: "u", content, infer: false, ...extra }, env());
  const first = (await remember("Gus likes jazz", { observedAt: "2024-01-05T00:00:00Z" })) as any;
  expect(first.memories[0].observedAt).toBe("2024-01-05T00:00:00.000Z");
  await Bun.sleep(5);
  between = new Date().toISOString();
  await Bun.sleep(5);
  expect((await s.json("DELETE", `/v1/memory/${first.memories[0].id}`)).status).toBe(200);
  await remember("Gus likes blues");
});
afterAll(() => s.stop());

describe("as_of", () => {
  test("list_memories: the memories as they were then; now: the current ones", async () => {
    const then = (await runTool(
      tool("list_memories"),
      { namespace: "agent", entity: "u", as_of: between },
      env(),
    )) as any;
    expect(then.memories.map((m: any) => m.content)).toEqual(["Gus likes jazz"]);
    const now = (await runTool(tool("list_memories"), { namespace: "agent", entity: "u" }, env())) as any;
    expect(now.memories.map((m: any) => m.content)).toEqual(["Gus likes blues"]);
  });

  test("recall: keyword search among the memories of that moment", async () => {
    const r = (await runTool(
      tool("recall"),
      { namespace: "agent", entity: "u", query: "Gus likes", as_of: between },
      env(),
    )) as any;
    expect(r.mode).toBe("keyword");
    expect(r.results.map((m: any) => m.content)).toEqual(["Gus likes jazz"]);
  });

  test("list_memories of a whole namespace as of a moment; recall without an entity: the API's refusal, in words", async () => {
    const all = (await runTool(tool("list_memories"), { namespace: "agent", as_of: between }, env())) as any;
    expect(all.memories.map((m: any) => m.content)).toEqual(["Gus likes jazz"]);
    const e = await runTool(tool("recall"), { namespace: "agent", query: "Gus", as_of: between }, env()).catch(
      (x) => x,
    );
    expect(e).toBeInstanceOf(ToolError);
    expect((e as ToolError).details?.[0].field).toBe("entity");
  });
});
