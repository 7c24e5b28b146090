// What a store answers when the connection to PostgreSQL dies while its COMMIT is on the way, and
// what a retry with the same Idempotency-Key then does, decided exactly: memd talks to PostgreSQL
// through a TCP proxy of this test, which cuts the connection at the COMMIT, either after
// PostgreSQL committed (the answer is lost) or before PostgreSQL saw it. Both times the store
// answers 503 outcome_unknown, and the retry makes the memory exactly once: it replays the first
// answer when the change committed, and makes the change when it did not. Needs the test
// PostgreSQL of scripts/with-postgres.
import { afterAll, beforeAll, expect, test } from "bun:test";
import type { Socket } from "bun";
import { SQL } from "bun";
import { freshDatabase, startTestServer, type TestServer } from "../helpers";

type Cut = "none" | "after-commit" | "before-commit";

/** Relays bytes between memd and PostgreSQL; `arm(cut)` cuts the next COMMIT's connection. */
function commitCutter(target: { hostname: string; port: number }) {
  let armed: Cut = "none";
  let cuts = 0;
  type Pair = { client: Socket<Pair>; server?: Socket<unknown>; pending: Uint8Array[]; swallowCommitDone: boolean };
  const commit = Buffer.from("COMMIT");
  const commitDone = Buffer.from("COMMIT\0");
  const cut = (p: Pair) => {
    cuts++;
    p.client.end();
    p.server?.end();
  };
  const listener = Bun.listen<Pair>({
    hostname: "127.0.0.1",
    port: 0,
    socket: {
      async open(client) {
        const pair: Pair = { client, pending: [], swallowCommitDone: false };
        client.data = pair;
        pair.server = await Bun.connect({
          ...target,
          socket: {
            data(_s, chunk) {
              if (pair.swallowCommitDone && Buffer.from(chunk).includes(commitDone)) return cut(pair);
              pair.client.write(chunk);
            },
            close() {
              pair.client.end();
            },
            error() {
              pair.client.end();
            },
          },
        });
        for (const c of pair.pending) pair.server.write(c);
        pair.pending = [];
      },
      data(client, chunk) {
        const pair = client.data;
        if (armed !== "none" && Buffer.from(chunk).includes(commit)) {
          const how = armed;
          armed = "none";
          // Before: PostgreSQL never sees the COMMIT and rolls back when the connection goes.
          if (how === "before-commit") return cut(pair);
          // After: the COMMIT goes through; its answer never comes back.
          pair.swallowCommitDone = true;
        }
        if (pair.server) pair.server.write(chunk);
        else pair.pending.push(chunk);
      },
      close(client) {
        client.data?.server?.end();
      },
    },
  });
  return {
    port: listener.port,
    arm(how: Cut) {
      armed = how;
    },
    get cuts() {
      return cuts;
    },
    stop: () => listener.stop(true),
  };
}

let direct: string;
let proxy: ReturnType<typeof commitCutter>;
let s: TestServer;

beforeAll(async () => {
  direct = await freshDatabase();
  const u = new URL(direct);
  proxy = commitCutter({ hostname: u.hostname, port: Number(u.port) });
  const through = `postgres://${u.username}@127.0.0.1:${proxy.port}${u.pathname}`;
  // Unnamed statements (as behind a transaction-mode pooler): every COMMIT carries its text.
  // Without the built-in embedder: its background write of a store's vector is a transaction of
  // its own, whose COMMIT the proxy could cut instead of the store's.
  s = await startTestServer({
    args: ["--database-url", through, "--database-pooler", "transaction"],
    env: { MEMD_EMBEDDER: "none" },
  });
});

afterAll(async () => {
  await s?.stop();
  proxy?.stop();
});

const store = (content: string, key?: string) =>
  s.api(
    "POST",
    "/v1/memory",
    { namespace: "outcome", entity: "u", content, infer: false },
    { headers: { "content-type": "application/json", ...(key ? { "idempotency-key": key } : {}) } },
  );

async function memoriesWith(content: string): Promise<number> {
  const sql = new SQL(direct);
  try {
    const [{ n }] = await sql`SELECT count(*)::int AS n FROM memories WHERE content = ${content}`;
    return n;
  } finally {
    await sql.close();
  }
}

/** Retries until the store answers 200 (the pool may hand out a cut connection once more). */
async function retried(content: string, key: string) {
  for (let i = 0; i < 20; i++) {
    const r = await store(content, key);
    if (r.status === 200) return r;
    expect(r.status).toBe(503);
    await Bun.sleep(50);
  }
  throw new Error("the retry was never answered 200");
}

test("the connection cut after PostgreSQL committed: 503 outcome_unknown, and the retry replays the first answer", async () => {
  const cuts = proxy.cuts;
  proxy.arm("after-commit");
  const first = await store("committed, answer lost", "k-after");
  expect(proxy.cuts).toBe(cuts + 1);
  expect(first.status).toBe(503);
  const body = (await first.json()) as { error: { code: string; message: string } };
  expect(body.error.code).toBe("outcome_unknown");
  expect(body.error.message).toContain("retry with the same Idempotency-Key");
  expect(await memoriesWith("committed, answer lost")).toBe(1);

  const again = await retried("committed, answer lost", "k-after");
  expect(again.headers.get("idempotent-replayed")).toBe("true");
  expect(await memoriesWith("committed, answer lost")).toBe(1);
});

test("the connection cut before PostgreSQL saw the COMMIT: 503 outcome_unknown, and the retry makes the change once", async () => {
  const cuts = proxy.cuts;
  proxy.arm("before-commit");
  const first = await store("never committed", "k-before");
  expect(proxy.cuts).toBe(cuts + 1);
  expect(first.status).toBe(503);
  expect(((await first.json()) as { error: { code: string } }).error.code).toBe("outcome_unknown");
  expect(await memoriesWith("never committed")).toBe(0);

  const again = await retried("never committed", "k-before");
  expect(again.headers.get("idempotent-replayed")).toBeNull();
  const id = ((await again.json()) as { memories: { id: string }[] }).memories[0].id;
  expect(await memoriesWith("never committed")).toBe(1);
  const replay = await store("never committed", "k-before");
  expect(replay.headers.get("idempotent-replayed")).toBe("true");
  expect(((await replay.json()) as { memories: { id: string }[] }).memories[0].id).toBe(id);
  expect(await memoriesWith("never committed")).toBe(1);
});

test("without an Idempotency-Key the answer is the same 503 outcome_unknown: the client must read before writing again", async () => {
  proxy.arm("after-commit");
  const r = await store("no key");
  expect(r.status).toBe(503);
  expect(((await r.json()) as { error: { code: string } }).error.code).toBe("outcome_unknown");
  expect(await memoriesWith("no key")).toBe(1);
});
