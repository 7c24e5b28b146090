// @targets lmdb postgres binary
// The MCP server as agents meet it: the SDK's own client over streamable HTTP (POST /mcp on a
// running server) and over stdio (`bun run src/main.ts mcp` and the built `dist/memd mcp`,
// both against a running memd with --url and on their own data dir with --data-dir).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { getDefaultEnvironment, StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { runTool, tools } from "../../src/mcp/tools";
import { buildBinary } from "../binary-helpers";
import { startTestServer, type TestServer, tempDir, untilEmbedded } from "../helpers";

const repo = join(import.meta.dir, "../..");
const tmp = tempDir("memd-mcp-");
let s: TestServer;
let readKey: string;
let acmeKey: string; // read_write on acme only
let bin: string;
const open: Client[] = [];

beforeAll(async () => {
  s = await startTestServer();
  const key = async (permission: string, namespaces: string[]) => {
    const r = await s.json("POST", "/v1/keys", { name: `mcp-${permission}`, permission, namespaces });
    expect(r.status).toBe(201);
    return r.body.secret as string;
  };
  readKey = await key("read", ["*"]);
  acmeKey = await key("read_write", ["acme"]);
  bin = buildBinary(join(tmp.dir, "build", "memd"));
}, 120_000);

afterAll(async () => {
  await Promise.all(open.map((c) => c.close().catch(() => {})));
  await s.stop();
  tmp.cleanup();
});

async function connect(transport: StreamableHTTPClientTransport | StdioClientTransport) {
  const client = new Client({ name: "memd-test", version: "1.0.0" });
  open.push(client);
  await client.connect(transport);
  return client;
}

/** An MCP client over POST /mcp with `key`; `query` sets the tools' defaults. */
const overHttp = (key: string, query = "") =>
  connect(
    new StreamableHTTPClientTransport(new URL(`${s.url}/mcp${query}`), {
      requestInit: { headers: { authorization: `Bearer ${key}` } },
    }),
  );

const spawned: (() => string)[] = [];
/** Runs a test body; if it fails, the error carries the stderr of the processes it spawned. */
const explained = (body: () => Promise<void>) => async () => {
  spawned.length = 0;
  try {
    await body();
  } catch (e) {
    (e as Error).message += `\n--- stderr of memd mcp ---\n${spawned.map((f) => f()).join("\n")}`;
    throw e;
  }
};

/** An MCP client over stdio to a spawned `memd mcp ...args`; stderr is kept for failure messages. */
async function overStdio(command: string, args: string[], env: Record<string, string> = {}) {
  const transport = new StdioClientTransport({
    command,
    args,
    cwd: repo,
    env: { ...getDefaultEnvironment(), MEMD_LOG_LEVEL: "warn", ...env },
    stderr: "pipe",
  });
  let stderr = "";
  transport.stderr?.on("data", (c) => (stderr += String(c)));
  spawned.push(() => `$ ${command} ${args.join(" ")}\n${stderr}`);
  // A line on stdout that is not an MCP message would surface here.
  const errors: Error[] = [];
  const client = await connect(transport).catch((e) => {
    throw new Error(`memd mcp did not start: ${e}\n${stderr}`);
  });
  transport.onerror = (e) => errors.push(e);
  return { client, errors, stderr: () => stderr };
}

/** Calls a tool; answers whether it failed, its text, and the text parsed as JSON when it is. */
async function call(client: Client, name: string, args: Record<string, unknown> = {}) {
  const r = (await client.callTool({ name, arguments: args })) as {
    isError?: boolean;
    content: { type: string; text: string }[];
    structuredContent?: any;
  };
  const text = r.content[0]?.text ?? "";
  let data: any;
  try {
    data = JSON.parse(text);
  } catch {}
  return { isError: r.isError === true, text, data, structured: r.structuredContent };
}

const names = [
  "remember",
  "recall",
  "get_context",
  "list_memories",
  "forget",
  "changes",
  "history",
  "revert",
  "consolidate",
];

describe("over HTTP: POST /mcp", () => {
  test("lists the nine tools with JSON Schemas and read-only hints", async () => {
    const c = await overHttp(readKey);
    const { tools } = await c.listTools();
    expect(tools.map((t) => t.name)).toEqual(names);
    for (const t of tools) {
      expect(t.inputSchema.type).toBe("object");
      expect(t.description!.length).toBeGreaterThan(80);
      expect(t.annotations?.readOnlyHint).toBe(!["remember", "forget", "revert", "consolidate"].includes(t.name));
    }
    const remember = tools.find((t) => t.name === "remember")!;
    expect(remember.inputSchema.required).toEqual(["namespace", "entity", "content"]);
    expect(Object.keys(remember.inputSchema.properties!)).toContain("infer");
    expect(tools.find((t) => t.name === "recall")!.inputSchema.required).toEqual(["namespace", "query"]);
  });

  test("?namespace=&entity= on the URL make those fields optional defaults", async () => {
    const c = await overHttp(acmeKey, "?namespace=acme&entity=http-u");
    const remember = (await c.listTools()).tools.find((t) => t.name === "remember")!;
    expect(remember.inputSchema.required).toEqual(["content"]);
    const r = await call(c, "remember", { content: "Uses the HTTP transport", infer: false });
    expect(r.isError).toBe(false);
    expect(r.data.memories[0]).toMatchObject({ namespace: "acme", entity: "http-u", event: "ADD" });
    // An argument wins over the default; a memory's history by id ignores the entity default.
    const other = await call(c, "remember", { entity: "http-v", content: "Another entity", infer: false });
    expect(other.data.memories[0].entity).toBe("http-v");
    const history = await call(c, "history", { memoryId: other.data.memories[0].id });
    expect(history.data.events.map((e: any) => [e.entity, e.event])).toEqual([["http-v", "ADD"]]);
  });

  test("every tool's happy path, in the order an agent would use them", async () => {
    const c = await overHttp(acmeKey);
    const at = { namespace: "acme", entity: "u1" };

    const raw = await call(c, "remember", {
      ...at,
      content: "Prefers tea over coffee",
      infer: false,
      tags: ["drinks"],
    });
    expect(raw.isError).toBe(false);
    expect(raw.structured).toEqual(raw.data);
    const teaId = raw.data.memories[0].id as string;
    // Smart by default: the built-in extractor splits the content into facts.
    const smart = await call(c, "remember", { ...at, content: "I moved to Lisbon. I work as a nurse." });
    expect(smart.isError).toBe(false);
    expect(smart.data.memories.map((m: any) => m.content)).toEqual(["I moved to Lisbon.", "I work as a nurse."]);

    // (Their vectors written first: a search waits for them at most a second, which a loaded
    // machine can outlast; this test is about the tools, not that wait.)
    await untilEmbedded(s);
    const recall = await call(c, "recall", { ...at, query: "what does the user drink, tea?" });
    expect(recall.isError).toBe(false);
    expect(recall.data.results[0]).toMatchObject({ id: teaId, content: "Prefers tea over coffee" });
    // Hybrid with the built-in embedder (the default): the tea first, the other facts after it.
    expect(recall.data.mode).toBe("hybrid");
    expect(
      recall.data.results
        .map((m: any) => m.content)
        .slice(1)
        .sort(),
    ).toEqual(["I moved to Lisbon.", "I work as a nurse."]);
    // The prompt-ready block: the best hit first, under its category, with its date.
    const context = await call(c, "get_context", { ...at, query: "tea", maxTokens: 100 });
    expect(context.isError).toBe(false);
    expect(context.data.context).toMatch(/^## general\n- \[\d{4}-\d{2}-\d{2}\] Prefers tea over coffee$/);
    expect(context.data.memories.map((m: any) => m.id)).toEqual([teaId]);
    expect(context.data.tokens).toBeLessThanOrEqual(100);
    const byTag = await call(c, "recall", { ...at, query: "tea lisbon nurse", tags: ["drinks"] });
    expect(byTag.data.results.map((m: any) => m.id)).toEqual([teaId]);

    const list = await call(c, "list_memories", { ...at, limit: 10 });
    expect(list.data.memories).toHaveLength(3);
    expect(list.data.nextCursor).toBeNull();
    // Paged as GET /v1/memory pages: nextCursor until null, nothing lost or repeated; filters as there.
    const first = await call(c, "list_memories", { ...at, limit: 2 });
    expect(first.data.memories).toHaveLength(2);
    const second = await call(c, "list_memories", { ...at, limit: 2, cursor: first.data.nextCursor });
    expect(second.data).toMatchObject({ nextCursor: null });
    expect([...first.data.memories, ...second.data.memories].map((m: any) => m.id)).toEqual(
      list.data.memories.map((m: any) => m.id),
    );
    const tagged = await call(c, "list_memories", { ...at, tags: ["drinks"] });
    expect(tagged.data.memories.map((m: any) => m.id)).toEqual([teaId]);
    expect((await call(c, "list_memories", { ...at, category: "no-such" })).data.memories).toEqual([]);

    const changes = await call(c, "changes", at);
    expect(changes.data).toMatchObject({ changeCount: 3, summary: "3 new, 0 updated, 0 replaced", hasMore: false });

    expect(await call(c, "forget", { id: teaId })).toMatchObject({ isError: false, data: { deleted: true } });
    expect((await call(c, "list_memories", at)).data.memories).toHaveLength(2);

    const one = await call(c, "history", { memoryId: teaId });
    expect(one.data.events.map((e: any) => e.event)).toEqual(["DELETE", "ADD"]);
    const entity = await call(c, "history", { ...at, limit: 2 });
    expect(entity.data.events).toHaveLength(2);
    expect(entity.data.events[0]).toMatchObject({ memoryId: teaId, event: "DELETE" });
  });

  test("remember keeps metadata keys such as constructor and prototype, as POST /v1/memory does", async () => {
    const c = await overHttp(acmeKey);
    const metadata = { constructor: "kept", prototype: { nested: true } };
    const r = await call(c, "remember", { namespace: "acme", entity: "meta", content: "x", infer: false, metadata });
    expect(r.isError).toBe(false);
    expect((await s.json("GET", `/v1/memory/${r.data.memories[0].id}`)).body.metadata).toEqual(metadata);
    // "__proto__" stays refused everywhere in a body (it cannot round-trip).
    const proto = await s.api(
      "POST",
      "/mcp",
      '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"remember","arguments":{"namespace":"acme","entity":"meta","content":"y","metadata":{"__proto__":{"a":1}}}}}',
      { key: acmeKey, headers: { "content-type": "application/json", accept: "application/json, text/event-stream" } },
    );
    expect(proto.status).toBe(400);
  });

  // One bad input per tool: refused with memd's code and message as a tool error, not a protocol error.
  test.each([
    ["remember", { namespace: "acme", entity: "u1" }, /^invalid_request: invalid request: content: is required$/],
    [
      "remember",
      { namespace: "acme", entity: "u1", content: "x", colour: "red" },
      /^invalid_request: invalid request: colour: is not a known field$/,
    ],
    [
      "remember",
      { namespace: "acme", entity: "u1", content: "" },
      /^invalid_request: invalid request: content: must be a string that is not blank$/,
    ],
    ["forget", {}, /^invalid_request: invalid request: id: is required$/],
    ["recall", { namespace: "acme", entity: "u1" }, /^invalid_request: .*query/],
    ["list_memories", { namespace: "acme", limit: 0 }, /^invalid_request: .*limit/],
    ["forget", { id: "not-a-uuid" }, /^invalid_request: .*id/],
    ["forget", { id: "01890000-0000-7000-8000-000000000000" }, /^not_found: no memory with that id$/],
    [
      "changes",
      { namespace: "acme", since: "yesterday" },
      /^invalid_request: invalid request: since: must be an ISO 8601/,
    ],
    ["history", { entity: "u1" }, /^invalid_request: namespace: is required unless memoryId is given$/],
    ["no_such_tool", {}, /^not_found: no tool named no_such_tool/],
  ])("%s %j is a tool error", async (name, args, message) => {
    const c = await overHttp(acmeKey);
    const r = await call(c, name, args);
    expect(r.isError).toBe(true);
    expect(r.text).toMatch(message);
    expect(r.structured.error.code).toBe(r.text.split(":")[0]);
  });

  test("revert and consolidate take a change back and merge duplicates, scoped like the other tools", async () => {
    const c = await overHttp(acmeKey, "?namespace=acme&entity=undo-u");
    const m = (await call(c, "remember", { content: "Drinks green tea", infer: false })).data.memories[0];
    await call(c, "remember", { content: "drinks green tea.", infer: false });
    const [added] = (await call(c, "history", { memoryId: m.id })).data.events;
    expect((await call(c, "forget", { id: m.id })).isError).toBe(false);
    const back = await call(c, "revert", { memoryId: m.id, toEvent: added.id });
    expect(back.isError).toBe(false);
    expect(back.data).toMatchObject({ action: "add", after: { id: m.id, content: "Drinks green tea" } });
    const dry = await call(c, "consolidate", { dryRun: true });
    expect(dry.data).toMatchObject({ dryRun: true, memoriesMerged: 1 });
    const done = await call(c, "consolidate", {});
    expect(done.data.events.map((e: any) => e.event)).toEqual(["MERGE", "DELETE"]);
    // Another namespace's memory is not found through this key.
    const other = await s.json("POST", "/v1/memory", { namespace: "other", entity: "x", content: "x", infer: false });
    const foreign = await call(c, "revert", { memoryId: other.body.memories[0].id, toEvent: "1" });
    expect(foreign).toMatchObject({ isError: true });
    expect(foreign.text).toMatch(/^not_found: /);
    // A read key may not revert.
    const reader = await overHttp(readKey);
    const denied = await call(reader, "revert", { memoryId: m.id, toEvent: added.id });
    expect(denied.text).toMatch(/^forbidden: /);
  });

  test("a read key calling remember gets the permission error; reading works", async () => {
    const c = await overHttp(readKey);
    const r = await call(c, "remember", { namespace: "acme", entity: "u1", content: "x", infer: false });
    expect(r).toMatchObject({ isError: true, text: "forbidden: this key lacks the read_write permission" });
    expect((await call(c, "list_memories", { namespace: "acme" })).isError).toBe(false);
  });

  test("a key scoped to acme gets an error for a foreign namespace", async () => {
    const c = await overHttp(acmeKey);
    for (const [name, args] of [
      ["remember", { namespace: "other", entity: "u1", content: "x", infer: false }],
      ["recall", { namespace: "other", query: "x" }],
      ["changes", { namespace: "other" }],
      ["consolidate", { namespace: "other", entity: "u1" }],
    ] as const) {
      const r = await call(c, name, args);
      expect(r.isError).toBe(true);
      expect(r.text).toMatch(/^forbidden: /);
    }
  });

  test("the endpoint needs a key and answers only POST", async () => {
    const noKey = await s.api("POST", "/mcp", { jsonrpc: "2.0", id: 1, method: "tools/list" }, { key: null });
    expect(noKey.status).toBe(401);
    expect(((await noKey.json()) as any).error.code).toBe("unauthorized");
    const bad = await s.api("POST", "/mcp", {}, { key: "memd_not_a_key" });
    expect(bad.status).toBe(401);
    for (const method of ["GET", "DELETE"]) {
      const r = await s.api(method, "/mcp");
      expect(r.status).toBe(405);
      expect(r.headers.get("allow")).toBe("POST");
      expect(((await r.json()) as any).error.code).toBe("method_not_allowed");
    }
  });
});

test("the log shows the transport's own status, and a tool's REST calls under the MCP request's id", async () => {
  const post = (accept: string, requestId: string) =>
    s.api(
      "POST",
      "/mcp",
      { jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "list_memories", arguments: { namespace: "a" } } },
      {
        headers: {
          "content-type": "application/json",
          accept,
          "mcp-protocol-version": "2025-06-18",
          "x-request-id": requestId,
        },
      },
    );
  expect((await post("application/json", "mcp-406")).status).toBe(406);
  const ok = await post("application/json, text/event-stream", "mcp-ok");
  expect(ok.status).toBe(200);
  expect(((await ok.json()) as any).result.structuredContent).toEqual({ memories: [], nextCursor: null });
  // Request lines are written after the answer is sent: wait for them, within a bound.
  const linesOf = (id: string) =>
    s.logs
      .filter((l) => l.includes('"msg":"request"'))
      .map((l) => JSON.parse(l))
      .filter((l) => l.requestId === id)
      .map((l) => `${l.method} ${l.path} ${l.status}`)
      .sort();
  for (let deadline = Date.now() + 5000; linesOf("mcp-ok").length < 2 && Date.now() < deadline; ) await Bun.sleep(10);
  expect(linesOf("mcp-406")).toEqual(["POST /mcp 406"]);
  expect(linesOf("mcp-ok")).toEqual(["GET /v1/memory 200", "POST /mcp 200"]);
});

// Each kind of process once: against the running server (--url) and on its own store (--data-dir).
const stdioCases = [
  ["bun run src/main.ts mcp", () => [process.execPath, "run", "src/main.ts", "mcp"]],
  ["dist/memd mcp", () => [bin, "mcp"]],
] as const;

describe.each(stdioCases)("over stdio: %s", (_label, command) => {
  test(
    "--url with defaults: tools, a remember without namespace or entity, and the key's scope",
    explained(async () => {
      const [cmd, ...args] = command();
      const entity = `stdio-${cmd === bin ? "bin" : "src"}`;
      const p = await overStdio(cmd, [...args, "--url", s.url, "--namespace", "acme", "--entity", entity], {
        MEMD_API_KEY: acmeKey,
      });
      const { tools } = await p.client.listTools();
      expect(tools.map((t) => t.name)).toEqual(names);
      expect(tools.find((t) => t.name === "remember")!.inputSchema.required).toEqual(["content"]);

      const r = await call(p.client, "remember", { content: "Speaks Portuguese", infer: false });
      expect(r.isError).toBe(false);
      expect(r.data.memories[0]).toMatchObject({ namespace: "acme", entity, content: "Speaks Portuguese" });
      const recall = await call(p.client, "recall", { query: "which language does she speak? Portuguese" });
      expect(recall.data.results[0].content).toBe("Speaks Portuguese");
      const foreign = await call(p.client, "list_memories", { namespace: "other" });
      expect(foreign).toMatchObject({ isError: true, text: expect.stringMatching(/^forbidden: /) });
      // The memory is in the server's store, where REST sees it.
      const listed = await s.json("GET", `/v1/memory?namespace=acme&entity=${entity}`);
      expect(listed.body.memories.map((m: any) => m.content)).toEqual(["Speaks Portuguese"]);
      expect(p.errors).toEqual([]);
    }),
  );

  test("stdin closed right after the calls: every call already read is answered before the process exits", async () => {
    const [cmd, ...args] = command();
    const entity = `stdin-end-${cmd === bin ? "bin" : "src"}`;
    const proc = Bun.spawn([cmd, ...args, "--url", s.url, "--namespace", "acme", "--entity", entity], {
      cwd: repo,
      env: { ...process.env, MEMD_API_KEY: acmeKey },
      stdin: "pipe",
      stdout: "pipe",
      stderr: "pipe",
    });
    const call = (id: number, name: string, args: object) => ({
      jsonrpc: "2.0",
      id,
      method: "tools/call",
      params: { name, arguments: args },
    });
    const messages = [
      {
        jsonrpc: "2.0",
        id: 1,
        method: "initialize",
        params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "pipe", version: "1" } },
      },
      { jsonrpc: "2.0", method: "notifications/initialized" },
      call(2, "remember", { content: "Plays the oboe", infer: false }),
      call(3, "remember", { content: "Reads sci-fi", infer: false }),
      call(4, "recall", { query: "oboe" }),
      { jsonrpc: "2.0", id: 5, method: "tools/list" },
    ];
    // Everything at once, then end of input, as `printf ... | memd mcp` does.
    proc.stdin.write(messages.map((m) => `${JSON.stringify(m)}\n`).join(""));
    await proc.stdin.end();
    const [out, err] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text()]);
    expect({ code: await proc.exited, err }).toEqual({ code: 0, err: expect.not.stringContaining("rror") });
    const answers = out
      .split("\n")
      .filter((l) => l.trim())
      .map((l) => JSON.parse(l));
    expect(answers.map((a) => a.id).sort()).toEqual([1, 2, 3, 4, 5]);
    for (const a of answers)
      expect({ id: a.id, error: a.error, isError: a.result?.isError ?? false }).toEqual({
        id: a.id,
        error: undefined,
        isError: false,
      });
    const listed = await s.json("GET", `/v1/memory?namespace=acme&entity=${entity}`);
    expect(listed.body.memories.map((m: any) => m.content).sort()).toEqual(["Plays the oboe", "Reads sci-fi"]);
  }, 60_000);

  test(
    "--url with a read key: remember is refused with the permission error",
    explained(async () => {
      const [cmd, ...args] = command();
      const p = await overStdio(cmd, [...args, "--url", s.url, "--key", readKey]);
      const r = await call(p.client, "remember", { namespace: "acme", entity: "u1", content: "x" });
      expect(r).toMatchObject({ isError: true, text: "forbidden: this key lacks the read_write permission" });
    }),
  );

  test(
    "--data-dir: opens the store itself, with no key given",
    explained(async () => {
      const [cmd, ...args] = command();
      const dir = join(tmp.dir, `data-${cmd === bin ? "bin" : "src"}`);
      // A database URL in the environment does not redirect it: the store is the data dir named.
      const p = await overStdio(cmd, [...args, "--data-dir", dir, "--namespace", "local"], {
        MEMD_DATABASE_URL: "postgres://memd@127.0.0.1:1/nowhere",
      });
      const r = await call(p.client, "remember", { entity: "u1", content: "Has a cat named Miso. Walks to work." });
      expect(r.isError).toBe(false);
      expect(r.data.memories).toHaveLength(2);
      const changes = await call(p.client, "changes", { entity: "u1" });
      expect(changes.data.changeCount).toBe(2);
      expect(p.errors).toEqual([]);
      // Closing stdin stops it cleanly: the store is closed and its memories are there on the next open.
      await p.client.close();
      const again = await overStdio(cmd, [...args, "--data-dir", dir]);
      const list = await call(again.client, "list_memories", { namespace: "local", entity: "u1" });
      expect(list.data.memories.map((m: any) => m.content)).toEqual(["Walks to work.", "Has a cat named Miso."]);
      expect(existsSync(join(dir, "data.mdb"))).toBe(true);
    }),
  );
});

test(
  "a memd that cannot be reached is a tool error, and the process stays up",
  explained(async () => {
    const p = await overStdio(bin, ["mcp", "--url", "http://127.0.0.1:1", "--key", "memd_x"]);
    const r = await call(p.client, "list_memories", { namespace: "acme" });
    expect(r).toMatchObject({ isError: true, text: expect.stringMatching(/^unreachable: could not reach memd at /) });
    expect((await p.client.listTools()).tools).toHaveLength(names.length);
  }),
);

test("a --url with a path (memd behind a proxy at /memd) keeps it in every call", async () => {
  const proxy = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    fetch(req) {
      const url = new URL(req.url);
      if (!url.pathname.startsWith("/memd/")) return new Response("not under /memd", { status: 404 });
      return fetch(s.url + url.pathname.slice("/memd".length) + url.search, req);
    },
  });
  try {
    const tool = tools.find((t) => t.name === "list_memories")!;
    const env = { fetch, authorization: `Bearer ${readKey}`, baseUrl: `http://127.0.0.1:${proxy.port}/memd/` };
    expect(await runTool(tool, { namespace: "acme", entity: "u1" }, env)).toMatchObject({ nextCursor: null });
  } finally {
    proxy.stop(true);
  }
});

describe("memd mcp command line", () => {
  const run = (args: string[], env: Record<string, string> = {}) => {
    const p = Bun.spawnSync([bin, "mcp", ...args], { cwd: tmp.dir, env: { PATH: "/usr/bin:/bin", ...env } });
    return { code: p.exitCode, out: p.stdout.toString(), err: p.stderr.toString() };
  };

  test("--help lists the flags and tools", () => {
    const r = run(["--help"]);
    expect(r.code).toBe(0);
    expect(r.out).toMatch(
      /Usage: memd mcp[\s\S]*--url[\s\S]*MEMD_URL[\s\S]*--data-dir[\s\S]*--namespace[\s\S]*--entity/,
    );
    expect(r.out).toContain("remember, recall, get_context, list_memories, forget, changes, history");
    expect(run(["--help"]).out).toBe(r.out);
  });

  test.each([
    [[], {}, /needs --url/],
    [["--bogus"], {}, /bogus/],
    [["--url", "127.0.0.1:8420"], {}, /--url: expected http/],
    [["--url", "http://127.0.0.1:1", "--namespace", "a\tb"], {}, /--namespace/],
  ])("memd mcp %j exits 2 with a message", (args, env, message) => {
    const r = run(args as string[], env);
    expect(r.code).toBe(2);
    expect(r.out).toBe("");
    expect(r.err).toMatch(message);
    expect(r.err).toContain('Run "memd mcp --help" for usage.');
  });
});
