// @targets postgres
// A PostgreSQL that goes silent without a TCP reset (a cut network, a frozen host): memd reaches
// it through a TCP proxy in this test that, when told, stops forwarding without closing anything.
// Stores and reads must then answer 503 storage_unavailable within a bounded time (memd's own
// deadline, and its connect deadline for new connections), never hang until the kernel gives up
// on the connection; and once the proxy forwards again, memd serves again by itself.
import { afterAll, beforeAll, expect, test } from "bun:test";
import type { Socket } from "bun";
import type { PostgresStorage } from "../../src/storage/postgres/index";
import { freshDatabase, startTestServer, type TestServer } from "../helpers";

/**
 * A TCP proxy to PostgreSQL that can go silent: while `silent`, nothing is delivered either way
 * and nothing is closed. When it forwards again, new connections work at once, but a connection
 * that was open during the silence stays stalled for `stallMs` more before what was held is
 * delivered: TCP retransmits with a backoff that reaches minutes, so an old connection comes
 * back long after the network did.
 */
function silentProxy(upstreamPort: number, stallMs: number) {
  const state = { silent: false };
  type Pair = {
    client: Socket<Pair>;
    server?: Socket<unknown>;
    up: Uint8Array[];
    down: Uint8Array[];
    stalledUntil: number;
  };
  const pairs = new Set<Pair>();
  const flush = (p: Pair) => {
    if (state.silent || Date.now() < p.stalledUntil) return;
    if (p.server) for (const chunk of p.up.splice(0)) p.server.write(chunk);
    for (const chunk of p.down.splice(0)) p.client.write(chunk);
  };
  const listener = Bun.listen<Pair>({
    hostname: "127.0.0.1",
    port: 0,
    socket: {
      open(client) {
        const pair: Pair = { client, up: [], down: [], stalledUntil: 0 };
        client.data = pair;
        pairs.add(pair);
        Bun.connect({
          hostname: "127.0.0.1",
          port: upstreamPort,
          socket: {
            open(server) {
              pair.server = server;
              flush(pair);
            },
            data(_server, chunk) {
              pair.down.push(new Uint8Array(chunk));
              flush(pair);
            },
            close() {
              pairs.delete(pair);
              client.end();
            },
            error() {
              client.end();
            },
          },
        }).catch(() => client.end());
      },
      data(client, chunk) {
        client.data.up.push(new Uint8Array(chunk));
        flush(client.data);
      },
      close(client) {
        pairs.delete(client.data);
        client.data.server?.end();
      },
      error() {},
    },
  });
  return {
    port: listener.port,
    get silent() {
      return state.silent;
    },
    set silent(v: boolean) {
      state.silent = v;
      for (const p of pairs) {
        if (v) p.stalledUntil = Number.POSITIVE_INFINITY;
        else if (p.stalledUntil === Number.POSITIVE_INFINITY) {
          p.stalledUntil = Date.now() + stallMs;
          setTimeout(() => flush(p), stallMs + 10);
        }
      }
    },
    stop: () => listener.stop(true),
  };
}

let proxy: ReturnType<typeof silentProxy>;
let s: TestServer;
const statementTimeoutMs = 1000;

beforeAll(async () => {
  const url = new URL(await freshDatabase());
  proxy = silentProxy(Number(url.port), 120_000);
  url.port = String(proxy.port);
  url.hostname = "127.0.0.1";
  s = await startTestServer({
    args: [
      "--database-url",
      url.toString(),
      "--db-statement-timeout-ms",
      String(statementTimeoutMs),
      "--db-connect-timeout-ms",
      "1000",
    ],
  });
});
afterAll(async () => {
  proxy.silent = false;
  await s?.stop();
  proxy?.stop();
});

const store = (content: string) =>
  s.json("POST", "/v1/memory", { namespace: "silent", entity: "u", content, infer: false });

test("every connection has the server's own bounds: the statement timeout (reads too) and TCP keepalives", async () => {
  const { sql } = s.server.core.storage as PostgresStorage;
  // Outside a transaction, as reads run.
  const [r] =
    await sql`SELECT current_setting('statement_timeout') AS st, current_setting('tcp_keepalives_idle') AS ka`;
  expect([r.st, r.ka]).toEqual(["1s", "30"]);
});

test("a database gone silent: 503 within a bounded time, for stores and reads; served again once it answers", async () => {
  expect((await store("before the cut")).status).toBe(200);
  const kept = (await store("kept")).body.memories[0].id;

  proxy.silent = true;
  // Every kind of call, many at once (more than the pool), then more after them.
  const t0 = performance.now();
  const calls = () => [
    ...Array.from({ length: 12 }, (_, i) => store(`during the cut ${i}`)),
    s.json("GET", "/v1/memory?namespace=silent&entity=u"),
    s.json("GET", `/v1/memory/${kept}`),
    s.json("POST", "/v1/memory/search", { namespace: "silent", query: "kept", mode: "keyword" }),
    s.json("GET", "/v1/memory/events?namespace=silent"),
  ];
  const first = await Promise.all(calls());
  const second = await Promise.all(calls());
  const ms = performance.now() - t0;
  console.log(`silent database: ${first.length + second.length} calls answered in ${Math.round(ms)} ms`);
  for (const r of [...first, ...second]) {
    // A search may still answer from this replica's in-memory lists; nothing may hang or succeed in writing.
    if (r.status === 200) expect(r.body.results ?? r.body.memories ?? r.body.id).toBeDefined();
    else expect([r.status, r.body.error.code]).toEqual([503, "storage_unavailable"]);
  }
  expect(first.slice(0, 12).map((r) => r.status)).toEqual(Array(12).fill(503));
  // Bounded: a few deadlines, not the kernel's minutes (generous for a loaded machine).
  expect(ms).toBeLessThan(30_000);

  proxy.silent = false;
  let status = 0;
  // Old connections stay stalled for two minutes: memd must have given them up for new ones.
  for (const deadline = Date.now() + 20_000; status !== 200 && Date.now() < deadline; await Bun.sleep(200))
    status = (await store("after the cut")).status;
  expect(status).toBe(200);
  const list = await s.json("GET", "/v1/memory?namespace=silent&entity=u");
  expect(list.status).toBe(200);
  expect(list.body.memories.map((m: { content: string }) => m.content)).toContain("after the cut");
}, 120_000);

test("a stop after the silence ends without waiting for the connections still stalled", async () => {
  // Queries sent during the silence (and given up at their deadlines) may still be running on
  // connections that stay stalled for two minutes: closing the pools must not wait for them.
  const stopped = s.stop().then(() => "stopped" as const);
  const bound = new Promise<"still closing">((resolve) => setTimeout(() => resolve("still closing"), 30_000));
  expect(await Promise.race([stopped, bound])).toBe("stopped");
}, 60_000);
