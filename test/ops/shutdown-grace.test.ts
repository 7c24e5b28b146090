// @targets lmdb binary
// Shutdown with a deadline (issue 8): stalled uploads and a model that never answers cannot
// keep memd alive past MEMD_SHUTDOWN_GRACE_MS; what was acknowledged stays.
import { afterAll, expect, test } from "bun:test";
import { connect, type Socket } from "node:net";
import { startFakeModel } from "../fake-model";
import { rootSecret, spawnServer, tempDir } from "../helpers";

const tmp = tempDir("memd-shutdown-");
const fake = startFakeModel();
afterAll(async () => {
  await fake.stop();
  tmp.cleanup();
});

const headers = { authorization: `Bearer ${rootSecret}`, "content-type": "application/json" };

/** Opens a connection and sends a request whose body stops short of its Content-Length. */
function stalledUpload(url: string): Promise<Socket> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname, () => {
      socket.write(
        `POST /v1/memory HTTP/1.1\r\nHost: ${hostname}\r\nAuthorization: Bearer ${rootSecret}\r\n` +
          `Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"namespace":"s",`,
      );
      resolve(socket);
    });
    socket.on("error", () => {});
    socket.once("error", reject);
  });
}

test("SIGTERM with grace 2000 ms: 16 stalled uploads and 4 hung model calls; exit 0 within 3 s, acknowledged stores kept", async () => {
  fake.reply({ hang: true });
  const args = ["--data-dir", tmp.dir, "--shutdown-grace-ms", "2000", "--llm-base-url", fake.url, "--llm-model", "m"];
  const s = await spawnServer(args, { MEMD_API_KEY: rootSecret });
  const acked: string[] = [];
  for (let i = 0; i < 5; i++) {
    const r = await fetch(`${s.url}/v1/memory`, {
      method: "POST",
      headers,
      body: JSON.stringify({ namespace: "s", entity: "e", content: `kept ${i}`, infer: false }),
    });
    expect(r.status).toBe(200);
    acked.push(((await r.json()) as { memories: { id: string }[] }).memories[0].id);
  }
  const sockets = await Promise.all(Array.from({ length: 16 }, () => stalledUpload(s.url)));
  const smart = Array.from({ length: 4 }, (_, i) =>
    fetch(`${s.url}/v1/memory`, {
      method: "POST",
      headers,
      body: JSON.stringify({ namespace: "s", entity: `smart-${i}`, content: `I like tea ${i}` }),
    }).then(
      async (r) => ({ status: r.status, code: ((await r.json()) as { error?: { code: string } }).error?.code }),
      () => ({ status: 0, code: "connection closed" }),
    ),
  );
  // Wait (bounded) until all four smart stores are waiting on the model.
  for (const deadline = Date.now() + 10_000; fake.calls < 4 && Date.now() < deadline; ) await Bun.sleep(10);
  expect(fake.calls).toBe(4);

  const signalled = performance.now();
  s.proc.kill("SIGTERM");
  const code = await s.proc.exited;
  const exitMs = performance.now() - signalled;
  console.log(`shutdown: exit ${code} ${Math.round(exitMs)} ms after SIGTERM (grace 2000 ms)`);
  expect(code).toBe(0);
  expect(exitMs).toBeLessThan(3000);
  expect(await Promise.all(smart)).toEqual(Array(4).fill({ status: 503, code: "shutting_down" }));
  for (const socket of sockets) socket.destroy();
  expect(s.stdout()).toContain('"msg":"memd stopped"');

  fake.reply('{"operations":[]}');
  const again = await spawnServer(["--data-dir", tmp.dir], { MEMD_API_KEY: rootSecret });
  try {
    for (const id of acked) expect((await fetch(`${again.url}/v1/memory/${id}`, { headers })).status).toBe(200);
    // The aborted smart stores wrote nothing.
    const events = await fetch(`${again.url}/v1/memory/events?namespace=s&limit=100`, { headers });
    expect(((await events.json()) as unknown[]).length).toBe(5);
  } finally {
    again.proc.kill("SIGTERM");
    await again.proc.exited;
  }
}, 30_000);

test("embedding calls in flight are aborted when the grace ends: 503 shutting_down, nothing written", async () => {
  let embedCalls = 0;
  const hung = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    fetch() {
      embedCalls++;
      return new Promise<Response>(() => {}); // never answers
    },
  });
  const dir = tempDir("memd-shutdown3-");
  const embed = [
    "--embed-base-url",
    `http://127.0.0.1:${hung.port}/v1`,
    "--embed-model",
    "e",
    "--embed-timeout-ms",
    "60000",
  ];
  const s = await spawnServer(["--data-dir", dir.dir, "--shutdown-grace-ms", "1000", ...embed], {
    MEMD_API_KEY: rootSecret,
  });
  try {
    const answer = (path: string, body: object) =>
      fetch(`${s.url}${path}`, { method: "POST", headers, body: JSON.stringify(body) }).then(
        async (r) => ({ status: r.status, code: ((await r.json()) as { error?: { code: string } }).error?.code }),
        () => ({ status: 0, code: "connection closed" }),
      );
    const store = answer("/v1/memory", { namespace: "e", entity: "u", content: "I like tea", infer: false });
    const search = answer("/v1/memory/search", { namespace: "e", query: "tea", mode: "semantic" });
    for (const deadline = Date.now() + 10_000; embedCalls < 2 && Date.now() < deadline; ) await Bun.sleep(10);
    expect(embedCalls).toBe(2);
    s.proc.kill("SIGTERM");
    expect(await s.proc.exited).toBe(0);
    expect([await store, await search]).toEqual(Array(2).fill({ status: 503, code: "shutting_down" }));
  } finally {
    s.proc.kill("SIGKILL");
    hung.stop(true);
  }
  const again = await spawnServer(["--data-dir", dir.dir], { MEMD_API_KEY: rootSecret });
  try {
    const events = await fetch(`${again.url}/v1/memory/events?namespace=e`, { headers });
    expect(await events.json()).toEqual([]);
  } finally {
    again.proc.kill("SIGTERM");
    await again.proc.exited;
    dir.cleanup();
  }
}, 30_000);

test("a second signal exits at once", async () => {
  fake.reply({ hang: true });
  const dir = tempDir("memd-shutdown2-");
  const s = await spawnServer(["--data-dir", dir.dir, "--shutdown-grace-ms", "60000", "--llm-base-url", fake.url], {
    MEMD_API_KEY: rootSecret,
  });
  const before = fake.calls;
  const pending = fetch(`${s.url}/v1/memory`, {
    method: "POST",
    headers,
    body: JSON.stringify({ namespace: "s", entity: "e", content: "I like tea" }),
  }).catch(() => undefined);
  for (const deadline = Date.now() + 10_000; fake.calls === before && Date.now() < deadline; ) await Bun.sleep(10);
  s.proc.kill("SIGTERM");
  await Bun.sleep(100);
  expect(s.proc.exitCode).toBeNull(); // still draining: the grace is 60 s
  s.proc.kill("SIGTERM");
  expect(await s.proc.exited).toBe(1);
  await pending;
  dir.cleanup();
}, 30_000);

/** Sends `n` requests with bodies over the limit on one kept-alive connection; resolves with the answers' status lines. */
function overLimitTwice(url: string, n: number): Promise<{ socket: Socket; statuses: string[] }> {
  const { hostname, port } = new URL(url);
  const body = `{"namespace":"s","entity":"e","content":"${"x".repeat(1024 * 1024 + 10)}"}`;
  const request =
    `POST /v1/memory HTTP/1.1\r\nHost: ${hostname}\r\nAuthorization: Bearer ${rootSecret}\r\n` +
    `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
  return new Promise((resolve, reject) => {
    let seen = "";
    const socket = connect(Number(port), hostname, () => socket.write(request.repeat(n)));
    socket.on("data", (d) => {
      seen += d.toString("latin1");
      const statuses = seen.match(/HTTP\/1\.1 \d+/g) ?? [];
      if (statuses.length === n) resolve({ socket, statuses });
    });
    socket.on("error", reject);
  });
}

test("SIGTERM after two 413 answers on a kept-alive connection: the idle connection is closed at once, no grace waited", async () => {
  const dir = tempDir("memd-shutdown4-");
  // A long grace: exiting well within it shows that nothing was waited for.
  const s = await spawnServer(["--data-dir", dir.dir, "--shutdown-grace-ms", "30000"], { MEMD_API_KEY: rootSecret });
  try {
    const { socket, statuses } = await overLimitTwice(s.url, 2);
    expect(statuses).toEqual(["HTTP/1.1 413", "HTTP/1.1 413"]);
    const closed = new Promise<void>((resolve) => socket.on("close", () => resolve()));
    const signalled = performance.now();
    s.proc.kill("SIGTERM");
    expect(await s.proc.exited).toBe(0);
    const exitMs = performance.now() - signalled;
    console.log(
      `shutdown with an idle kept-alive connection: exit ${Math.round(exitMs)} ms after SIGTERM (grace 30000 ms)`,
    );
    expect(exitMs).toBeLessThan(15_000);
    await closed;
  } finally {
    s.proc.kill("SIGKILL");
    dir.cleanup();
  }
}, 60_000);
