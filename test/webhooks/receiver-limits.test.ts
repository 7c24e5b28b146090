// @targets lmdb binary
// The limits on a receiver, from outside: no connection within the connect time limit is a
// failure (a listener whose queue is full: Linux drops the connection's SYNs), an answer's body
// is not read past its cap (an endless 200 is a success, and the next event follows), and a
// receiver slow to answer on a kept connection is sent the event once an attempt.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { once } from "node:events";
import { connect, createServer, type Server, type Socket } from "node:net";
import { startTestServer, type TestServer } from "../helpers";

let s: TestServer;
const servers: { stop(force?: boolean): unknown }[] = [];
const sockets: Socket[] = [];
let listener: ReturnType<typeof Bun.spawn> | undefined;
const rawServers: Server[] = [];

beforeAll(async () => {
  s = await startTestServer({
    args: [
      "--webhook-allow-private",
      "--webhook-connect-timeout-ms",
      "400",
      "--webhook-timeout-ms",
      "1000",
      "--webhook-retry-base-ms",
      "60000",
    ],
  });
});
afterAll(async () => {
  await s.stop();
  for (const x of servers) x.stop(true);
  for (const x of sockets) x.destroy();
  listener?.kill();
  for (const x of rawServers) x.close();
});

async function until(what: string, check: () => Promise<boolean> | boolean) {
  const deadline = Date.now() + 15_000;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await Bun.sleep(20);
  }
}

const deliveries = async (id: string) =>
  (await s.json("GET", `/v1/webhooks/${id}/deliveries`)).body as { seq: number; ok: boolean; error: string | null }[];

test("no connection within the connect time limit: a failure that says so", async () => {
  // A socket listening with a backlog of 0 that never accepts: once one connection waits in its
  // queue, the kernel drops the SYNs of the next ones, which stay unconnected.
  const python = Bun.spawn(
    [
      "/usr/bin/python3",
      "-c",
      "import socket, sys\n" +
        "s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(0)\n" +
        "print(s.getsockname()[1], flush=True); sys.stdin.read()",
    ],
    { stdin: "pipe", stdout: "pipe" },
  );
  listener = python;
  const reader = python.stdout.getReader();
  const port = Number(new TextDecoder().decode((await reader.read()).value).trim());
  expect(port).toBeGreaterThan(0);
  for (let i = 0; i < 2; i++) sockets.push(connect(port, "127.0.0.1"));
  await until("the queue to fill", () => sockets[0].readyState === "open");
  const made = await s.json("POST", "/v1/webhooks", {
    url: `http://127.0.0.1:${port}/hook`,
    namespaces: "unreachable",
  });
  expect(made.status).toBe(201);
  await s.json("POST", "/v1/memory", { namespace: "unreachable", entity: "e", content: "x", infer: false });
  await until("a failed attempt", async () => (await deliveries(made.body.id)).length > 0);
  const [d] = await deliveries(made.body.id);
  expect(d.ok).toBe(false);
  expect(d.error).toBe("no connection within 400 ms");
});

// Read to its end, the endless answer would be a failure: no answer within the 10 s time limit.
test("an answer's body is not read past its cap: an endless 200 is a success, and the next event follows", async () => {
  let arrivals = 0;
  const receiver = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch: async (req) => {
      await req.text();
      arrivals++;
      const body = new ReadableStream({
        async pull(c) {
          c.enqueue(new Uint8Array(64 * 1024).fill(120));
          await Bun.sleep(5);
        },
      });
      return new Response(body, { status: arrivals === 1 ? 200 : 500 });
    },
  });
  servers.push(receiver);
  const made = await s.json("POST", "/v1/webhooks", {
    url: `http://127.0.0.1:${receiver.port}/`,
    namespaces: "endless",
  });
  for (const content of ["one", "two"])
    await s.json("POST", "/v1/memory", { namespace: "endless", entity: "e", content, infer: false });
  await until("two attempts", async () => (await deliveries(made.body.id)).length >= 2);
  const [second, first] = await deliveries(made.body.id);
  expect(first.ok).toBe(true);
  expect(second.ok).toBe(false);
  expect(second.seq).toBe(first.seq + 1);
  // The failure keeps the start of the answer only.
  expect(second.error).toStartWith("answered 500: xxxx");
  expect(second.error!.length).toBeLessThan(250);
  expect(arrivals).toBe(2);
});

test("a failure answered in chunks (no Content-Length) is read to its last chunk, not waited on until the time limit", async () => {
  const receiver = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch: async (req) => {
      await req.text();
      // Two chunks, the last one (and the end) later: Bun sends it chunked, the connection kept open.
      const body = new ReadableStream({
        start(c) {
          c.enqueue(new TextEncoder().encode("database "));
          setTimeout(() => {
            c.enqueue(new TextEncoder().encode("down"));
            c.close();
          }, 50);
        },
      });
      return new Response(body, { status: 503 });
    },
  });
  servers.push(receiver);
  const made = await s.json("POST", "/v1/webhooks", {
    url: `http://127.0.0.1:${receiver.port}/`,
    namespaces: "chunked",
  });
  await s.json("POST", "/v1/memory", { namespace: "chunked", entity: "e", content: "x", infer: false });
  await until("a failed attempt", async () => (await deliveries(made.body.id)).length > 0);
  const [d] = await deliveries(made.body.id);
  expect(d).toMatchObject({ ok: false, status: 503, error: "answered 503: database down" });
});

test("no answer in time on a kept connection: one POST an attempt, failed at the time limit (not sent again on a new connection)", async () => {
  let slow = false;
  const arrivals: string[] = [];
  const receiver = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch: async (req) => {
      await req.text();
      arrivals.push(req.headers.get("webhook-id") ?? "");
      if (slow) await Bun.sleep(4000);
      return new Response("ok");
    },
  });
  servers.push(receiver);
  const made = await s.json("POST", "/v1/webhooks", { url: `http://127.0.0.1:${receiver.port}/`, namespaces: "kept" });
  await s.json("POST", "/v1/memory", { namespace: "kept", entity: "e", content: "fast", infer: false });
  // Answered whole, with a length: the connection is kept for the next POST.
  await until("the first delivery", async () => (await deliveries(made.body.id)).some((d) => d.ok));
  slow = true;
  await s.json("POST", "/v1/memory", { namespace: "kept", entity: "e", content: "slow", infer: false });
  await until("a failed attempt", async () => (await deliveries(made.body.id)).some((d) => !d.ok));
  const [failedAttempt] = await deliveries(made.body.id);
  expect(failedAttempt.error).toBe("no answer within 1000 ms");
  expect(arrivals.filter((id) => id === arrivals[1])).toEqual([arrivals[1]]);
  expect(arrivals.length).toBe(2);
});

/**
 * A receiver that answers `head` and then `filler` every few ms, without end (until memd ends the
 * connection): an answer that never finishes its headers, or a chunked body of framing only.
 */
async function endlessReceiver(head: string, filler: string) {
  const server = createServer((sock) => {
    sock.on("error", () => {});
    sock.once("data", () => {
      sock.write(head);
      const timer = setInterval(() => {
        if (!sock.destroyed) sock.write(filler);
      }, 5);
      sock.on("close", () => clearInterval(timer));
    });
  });
  rawServers.push(server);
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  return (server.address() as { port: number }).port;
}

// Read to its end (the answer time limit, 1 s here), either would take all the receiver sends.
test("an answer's headers or a chunked body's framing are not read past their caps either", async () => {
  const cases: [string, string, string, string][] = [
    [
      "endless-head",
      "HTTP/1.1 200 OK\r\nx-junk: ",
      "a".repeat(4096),
      "no end of the answer's headers within 16384 bytes",
    ],
    ["endless-framing", "HTTP/1.1 500 Oops\r\ntransfer-encoding: chunked\r\n\r\n1;", "x".repeat(4096), "answered 500"],
  ];
  for (const [namespace, head, filler, error] of cases) {
    const port = await endlessReceiver(head, filler);
    const made = await s.json("POST", "/v1/webhooks", { url: `http://127.0.0.1:${port}/`, namespaces: namespace });
    await s.json("POST", "/v1/memory", { namespace, entity: "e", content: "x", infer: false });
    await until(`a failed attempt (${namespace})`, async () => (await deliveries(made.body.id)).length > 0);
    const [d] = await deliveries(made.body.id);
    expect({ namespace, ok: d.ok, error: d.error }).toEqual({ namespace, ok: false, error });
  }
});

test("an interim answer (100 Continue, 103 Early Hints) is passed over: the answer after it counts", async () => {
  const server = createServer((sock) => {
    sock.on("error", () => {});
    sock.once("data", () =>
      sock.write(
        "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nlink: </a>; rel=preload\r\n\r\n" +
          "HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok",
      ),
    );
  });
  rawServers.push(server);
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const { port } = server.address() as { port: number };
  const made = await s.json("POST", "/v1/webhooks", { url: `http://127.0.0.1:${port}/`, namespaces: "interim" });
  await s.json("POST", "/v1/memory", { namespace: "interim", entity: "e", content: "x", infer: false });
  await until("an attempt", async () => (await deliveries(made.body.id)).length > 0);
  const [d] = await deliveries(made.body.id);
  expect(d).toMatchObject({ ok: true, status: 200, error: null });
});
