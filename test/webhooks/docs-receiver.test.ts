// @targets lmdb
// The receiver of docs/webhooks.md runs as written: its TypeScript block, saved as a file and run
// with Bun as the page says, verifies real deliveries with the official library and prints them.
import { afterAll, expect, test } from "bun:test";
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { startTestServer } from "../helpers";

const repo = resolve(import.meta.dir, "../..");
const dir = join(repo, "test-artifacts", `webhook-receiver-${process.pid}`);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

test("docs/webhooks.md's receiver verifies and prints deliveries, and refuses a forged one", async () => {
  const page = readFileSync(join(repo, "docs/webhooks.md"), "utf8");
  const section = page.slice(page.indexOf("## A receiver"));
  const code = /```ts\n([\s\S]*?)```/.exec(section)?.[1];
  expect(code).toBeDefined();
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, "receiver.ts"), code!);

  const s = await startTestServer({ args: ["--webhook-allow-private", "--webhook-retry-base-ms", "50"] });
  // A free port for the receiver: bind one, let it go, hand it on.
  const probe = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => new Response() });
  const port = probe.port!;
  probe.stop(true);
  const made = await s.json("POST", "/v1/webhooks", { url: `http://127.0.0.1:${port}/`, namespaces: "docs" });
  expect(made.status).toBe(201);
  const proc = Bun.spawn([process.execPath, "receiver.ts"], {
    cwd: dir,
    env: { ...process.env, WEBHOOK_SECRET: made.body.secret, PORT: String(port) },
    stdout: "pipe",
    stderr: "pipe",
  });
  let out = "";
  void (async () => {
    for await (const chunk of proc.stdout) out += new TextDecoder().decode(chunk);
  })();
  try {
    await s.json("POST", "/v1/memory", {
      namespace: "docs",
      entity: "alice",
      content: "Alice prefers email",
      infer: false,
    });
    const deadline = Date.now() + 20_000;
    while (!out.includes("Alice prefers email") && Date.now() < deadline) await Bun.sleep(25);
    expect(out).toContain("memory.add #");
    expect(out).toContain("docs/alice: Alice prefers email");
    const forged = await fetch(`http://127.0.0.1:${port}/`, {
      method: "POST",
      headers: {
        "webhook-id": "msg_x",
        "webhook-timestamp": String(Math.floor(Date.now() / 1000)),
        "webhook-signature": "v1,AAAA",
      },
      body: "{}",
    });
    expect(forged.status).toBe(400);
  } finally {
    proc.kill();
    await proc.exited;
    await s.stop();
  }
});
