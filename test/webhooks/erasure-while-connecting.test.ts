// @targets lmdb
// An erasure answered while a delivery is still making its connection (here a TLS handshake the
// test holds up; a slow name lookup or a far receiver does the same): the POST was planned with
// the event as it was before, so it must not write that content after the erasure's answer. It
// sends nothing, keeps the connection, reads the event again and sends it scrubbed.
import { afterAll, expect, test } from "bun:test";
import type { Socket } from "bun";
import { call as callAs } from "../binary-helpers";
import { rootSecret, type ServerProcess, spawnServer, tempDir } from "../helpers";
import { selfSignedCert } from "./receiver";

const tmp = tempDir("memd-erase-connect-");
let server: ServerProcess | undefined;
const stops: (() => void)[] = [];
afterAll(() => {
  server?.proc.kill("SIGKILL");
  for (const stop of stops) stop();
  tmp.cleanup();
});

const call = (method: string, path: string, body?: unknown) => callAs(server!.url, rootSecret, method, path, body);

/** Polls until `check` holds (at most 20 s). */
async function until(what: string, check: () => Promise<boolean> | boolean) {
  const deadline = Date.now() + 20_000;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await Bun.sleep(20);
  }
}

test("an erasure answered during a delivery's TLS handshake: the erased content is never sent", async () => {
  const { cert, key } = selfSignedCert(tmp.dir);
  const bodies: string[] = [];
  const receiver = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    tls: { cert: Bun.file(cert), key: Bun.file(key) },
    fetch: async (req) => {
      bodies.push(await req.text());
      return new Response("ok");
    },
  });
  stops.push(() => receiver.stop(true));
  // A TCP relay in front of the receiver: while `held`, what memd sends (its TLS hello) waits.
  let held = true;
  let connections = 0;
  const waiting: (() => void)[] = [];
  type Pair = { to?: Socket<unknown>; queue: Uint8Array[] };
  const relay = Bun.listen<Pair>({
    hostname: "127.0.0.1",
    port: 0,
    socket: {
      async open(client) {
        connections++;
        client.data = { queue: [] };
        const to = await Bun.connect({
          hostname: "127.0.0.1",
          port: receiver.port!,
          socket: {
            data: (_s, chunk) => void client.write(chunk),
            close: () => void client.end(),
          },
        });
        const flush = () => {
          client.data.to = to;
          for (const c of client.data.queue.splice(0)) to.write(c);
        };
        if (held) waiting.push(flush);
        else flush();
      },
      data(client, chunk) {
        if (client.data.to) client.data.to.write(chunk);
        else client.data.queue.push(new Uint8Array(chunk));
      },
      close(client) {
        client.data.to?.end();
      },
    },
  });
  stops.push(() => relay.stop(true));

  server = await spawnServer(
    ["--data-dir", tmp.dir, "--webhook-allow-private", "--webhook-connect-timeout-ms", "60000"],
    { MEMD_API_KEY: rootSecret, MEMD_EMBEDDER: "none", NODE_EXTRA_CA_CERTS: cert },
  );
  const sub = await call("POST", "/v1/webhooks", { url: `https://localhost:${relay.port}/hook`, namespaces: "tls" });
  expect(sub.status).toBe(201);
  expect((await call("PATCH", `/v1/webhooks/${sub.body.id}`, { state: "paused" })).status).toBe(200);
  const stored = await call("POST", "/v1/memory", {
    namespace: "tls",
    entity: "alice",
    content: "alice's phone is 555-0199",
    infer: false,
  });
  expect(stored.status).toBe(200);
  // Resumed: the delivery reads the event, builds its POST and connects; the handshake waits.
  expect((await call("PATCH", `/v1/webhooks/${sub.body.id}`, { state: "active" })).status).toBe(200);
  await until("the delivery's connection", () => waiting.length > 0);
  expect((await call("POST", "/v1/memory/erase", { namespace: "tls", entity: "alice" })).status).toBe(200);
  held = false;
  for (const flush of waiting.splice(0)) flush();
  // The ADD (scrubbed), the erasure's DELETE and the erasure itself.
  await until("three deliveries", () => bodies.length >= 3);
  const types = bodies.map((b) => JSON.parse(b).type);
  expect(types.slice(0, 3)).toEqual(["memory.add", "memory.erased", "entity.erased"]);
  expect(JSON.parse(bodies[0]).data).toMatchObject({ entity: "alice", reason: "erased" });
  expect(bodies.join("\n")).not.toContain("555-0199");
  // Sent on the connection the handshake made (kept, not opened again).
  expect(connections).toBe(1);
});
