// Many memd processes on one PostgreSQL: the guarantees of issue 9 that only show with several
// replicas (order per namespace, smart stores per entity, revocation, TTL, a killed replica, a
// database that goes away and comes back). Needs the throwaway PostgreSQL of scripts/with-postgres;
// without it every test fails with the reason, none is skipped.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, readFileSync } from "node:fs";
import { SQL } from "bun";
import { createKeyIf, type NewKey } from "../../src/keys/service";
import { openPostgres } from "../../src/storage/postgres/index";
import { SCHEMA_VERSION } from "../../src/storage/postgres/schema";
import { type ChatRequest, startFakeModel } from "../fake-model";
import { freshDatabase, postgresUrl, rootSecret, type ServerProcess, spawnServer, tempDir } from "../helpers";
import { sseMessages } from "../sse";

const fake = startFakeModel();
const dir = tempDir("memd-replicas-");
/** Short database timeouts, so that an outage is answered quickly and the bounds below stay small. */
const connectTimeoutMs = 1000;
const statementTimeoutMs = 3000;

interface Replica extends ServerProcess {
  name: string;
}
let databaseUrl: string;
let replicas: Replica[] = [];
const extra: Replica[] = [];

async function startReplica(name: string): Promise<Replica> {
  const p = await spawnServer(
    [
      "--database-url",
      databaseUrl,
      "--data-dir",
      `${dir.dir}/${name}`,
      "--db-connect-timeout-ms",
      String(connectTimeoutMs),
      "--db-statement-timeout-ms",
      String(statementTimeoutMs),
    ],
    {
      MEMD_API_KEY: rootSecret,
      MEMD_LLM_BASE_URL: fake.url,
      MEMD_LLM_MODEL: "tiny",
      MEMD_LLM_TIMEOUT_MS: "5000",
      MEMD_MAX_MODEL_CALLS_PER_KEY: "100",
    },
  );
  return { ...p, name };
}

/** A request to a replica; a request that takes longer than `timeoutMs` fails the test as a hang. */
async function call(
  r: { url: string },
  method: string,
  path: string,
  body?: unknown,
  o: { key?: string; timeoutMs?: number } = {},
): Promise<{ status: number; body: any }> {
  const res = await fetch(r.url + path, {
    method,
    headers: {
      authorization: `Bearer ${o.key ?? rootSecret}`,
      ...(body === undefined ? {} : { "content-type": "application/json" }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(o.timeoutMs ?? 30_000),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}

const rawStore = (r: Replica, namespace: string, content: string, extraFields: object = {}, timeoutMs?: number) =>
  call(r, "POST", "/v1/memory", { namespace, entity: "u", content, infer: false, ...extraFields }, { timeoutMs });

/** Every event of a namespace through the diff, oldest first, paged with `limit` 173 by `nextSince` or by the last `createdAt` seen. */
async function pageDiff(r: Replica, namespace: string, by: "nextSince" | "createdAt", since?: string) {
  const seen: { id: string; createdAt: string }[] = [];
  let cursor = since;
  for (let pages = 0; pages < 1000; pages++) {
    const d = await call(r, "POST", "/v1/memory/diff", { namespace, limit: 173, ...(cursor ? { since: cursor } : {}) });
    expect(d.status).toBe(200);
    const items = [...d.body.created, ...d.body.updated, ...d.body.deleted] as { id: string; createdAt?: string }[];
    for (const c of d.body.created) seen.push({ id: c.id, createdAt: c.createdAt });
    if (by === "nextSince") cursor = d.body.nextSince ?? cursor;
    else if (items.length > 0) cursor = d.body.created.at(-1).createdAt;
    if (!d.body.hasMore) return { seen, cursor };
  }
  throw new Error("the diff did not end within 1000 pages");
}

function expectStrictlyIncreasing(times: string[]) {
  const bad = times.findIndex((t, i) => i > 0 && Date.parse(t) <= Date.parse(times[i - 1]));
  expect(bad === -1 ? "strictly increasing" : `not increasing at ${bad}: ${times[bad - 1]} then ${times[bad]}`).toBe(
    "strictly increasing",
  );
}

/** Polls `check` until it returns true or `ms` pass; true when it did. */
async function until(ms: number, check: () => Promise<boolean>, everyMs = 25): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (await check()) return true;
    await Bun.sleep(everyMs);
  }
  return check();
}

beforeAll(async () => {
  postgresUrl(); // fails here, with the reason, when there is no PostgreSQL
  databaseUrl = await freshDatabase();
  // Three replicas starting at the same moment on a fresh database: they race on the migrations.
  replicas = await Promise.all(["a", "b", "c"].map(startReplica));
}, 60_000);

afterAll(async () => {
  for (const r of [...replicas, ...extra]) r.proc.kill("SIGKILL");
  await Promise.all([...replicas, ...extra].map((r) => r.proc.exited));
  await fake.stop();
  dir.cleanup();
});

describe("three replicas on one PostgreSQL", () => {
  test("migrations are safe when replicas start at the same moment on a fresh database", async () => {
    expect(replicas.map((r) => r.proc.exitCode)).toEqual([null, null, null]);
    const sql = new SQL(databaseUrl);
    try {
      expect(await sql`SELECT id, version FROM memd_schema`).toEqual([{ id: 1, version: SCHEMA_VERSION }]);
    } finally {
      await sql.close();
    }
    // Again in one process, five at once, a few times over: every open succeeds, one schema results.
    for (let round = 0; round < 3; round++) {
      const url = await freshDatabase();
      const opened = await Promise.all(
        Array.from({ length: 5 }, () =>
          openPostgres({ url, pool: 2, connectTimeoutMs: 5000, statementTimeoutMs: 5000 }),
        ),
      );
      try {
        expect(await opened[0].sql`SELECT version FROM memd_schema`).toEqual([{ version: SCHEMA_VERSION }]);
        await opened[1].apply(
          [
            {
              event: "ADD",
              create: {
                id: Bun.randomUUIDv7(),
                namespace: "m",
                entity: "e",
                content: "x",
                category: "c",
                importance: 0.5,
              },
            },
          ],
          null,
        );
        expect((await opened[2].stats()).currentMemories).toBe(1);
      } finally {
        await Promise.all(opened.map((s) => s.close()));
      }
    }
  }, 30_000);

  test("on an empty database, replicas racing to make the first root key make one, not one each", async () => {
    const url = await freshDatabase();
    const opened = await Promise.all(
      Array.from({ length: 3 }, () => openPostgres({ url, pool: 5, connectTimeoutMs: 5000, statementTimeoutMs: 5000 })),
    );
    try {
      const spec = { name: "root", permission: "admin", namespaces: ["*"] } as NewKey;
      // What each replica's start does when MEMD_API_KEY is unset, five at a time per process.
      const made = await Promise.all(
        opened.flatMap((storage) => Array.from({ length: 5 }, () => createKeyIf(storage, spec, { onlyIfNone: true }))),
      );
      expect(made.filter(Boolean)).toHaveLength(1);
      expect(await opened[0].listKeys()).toHaveLength(1);
    } finally {
      await Promise.all(opened.map((o) => o.close()));
    }
  }, 30_000);

  test("3 × 16 concurrent raw-store writers on one namespace: every acknowledged store is there, and the diff pages each event once in order", async () => {
    const ns = "burst";
    const perWriter = 12;
    const acked: { id: string; createdAt: string }[] = [];
    // A reader that follows the namespace by nextSince while the writers run: an event visible to
    // it never has a stamp lower than one that becomes visible later, so it must miss nothing.
    const tailed: { id: string; createdAt: string }[] = [];
    let writing = true;
    const tail = (async () => {
      let cursor: string | undefined;
      for (;;) {
        const done = !writing;
        const page = await pageDiff(replicas[0], ns, "nextSince", cursor);
        tailed.push(...page.seen);
        cursor = page.cursor;
        if (done) return;
        await Bun.sleep(5);
      }
    })();
    await Promise.all(
      replicas.flatMap((r) =>
        Array.from({ length: 16 }, async (_, w) => {
          for (let i = 0; i < perWriter; i++) {
            const res = await rawStore(r, ns, `${r.name}-${w}-${i}`);
            expect(res.status).toBe(200);
            acked.push({ id: res.body.memories[0].id, createdAt: res.body.memories[0].createdAt });
          }
        }),
      ),
    );
    writing = false;
    await tail;
    expect(acked.length).toBe(3 * 16 * perWriter);

    const byNextSince = (await pageDiff(replicas[1], ns, "nextSince")).seen;
    const byCreatedAt = (await pageDiff(replicas[2], ns, "createdAt")).seen;
    const sortedAcked = [...acked].sort((x, y) => Date.parse(x.createdAt) - Date.parse(y.createdAt));
    for (const seen of [byNextSince, byCreatedAt, tailed]) {
      expect(new Set(seen.map((s) => s.id)).size).toBe(seen.length); // each event once
      expectStrictlyIncreasing(seen.map((s) => s.createdAt));
      expect(seen).toEqual(sortedAcked);
    }

    // Each acknowledged memory is readable on every replica, with its ADD event.
    const events = await call(replicas[1], "GET", `/v1/memory/events?namespace=${ns}&limit=1000`);
    expect(events.body.length).toBe(acked.length);
    const adds = new Map(events.body.map((e: any) => [e.memoryId, e]));
    for (const a of acked) expect((adds.get(a.id) as any)?.event).toBe("ADD");
    for (const a of acked.slice(0, 30)) {
      const m = await call(replicas[acked.indexOf(a) % 3], "GET", `/v1/memory/${a.id}`);
      expect([m.status, m.body.createdAt]).toEqual([200, a.createdAt]);
    }
  }, 60_000);

  test("overlapping smart stores through all three replicas leave no duplicate", async () => {
    const things = ["tea", "coffee", "jazz", "chess", "rain"];
    const userText = (r: ChatRequest) => String(r.messages.find((m) => m.role === "user")?.content);
    // Rewords "I like X" as "User likes X" and answers SKIP_DUPLICATE when that fact is offered.
    fake.reset();
    fake.reply((req) => {
      const text = userText(req);
      const existing = text.split("EXISTING MEMORIES:\n")[1].split("\n\nNEW CONTENT:")[0];
      const handles = new Map<string, string>();
      for (const line of existing.split("\n")) {
        const m = /^(m\d+) \[[^\]]*\] (.*)$/.exec(line);
        if (m) handles.set(m[2], m[1]);
      }
      const operations = [...text.matchAll(/I like (\w+)/g)].map(([, x]) => {
        const fact = `User likes ${x}`;
        const h = handles.get(fact);
        return h ? { fact, decision: "SKIP_DUPLICATE", target: h } : { fact, decision: "ADD" };
      });
      return JSON.stringify({ operations });
    });
    const results = await Promise.all(
      Array.from({ length: 24 }, (_, i) =>
        call(replicas[i % 3], "POST", "/v1/memory", {
          namespace: "race",
          entity: "u",
          content: `I like ${things[i % 5]}. I like ${things[(i + 2) % 5]}.`,
        }),
      ),
    );
    expect(results.map((r) => r.status)).toEqual(Array(24).fill(200));
    const listed = await call(replicas[0], "GET", "/v1/memory?namespace=race&entity=u&limit=100");
    expect(listed.body.memories.map((m: any) => m.content).sort()).toEqual(things.map((x) => `User likes ${x}`).sort());
    expect(results.reduce((n, r) => n + r.body.memories.length + r.body.skipped, 0)).toBe(48);
  }, 60_000);

  test("smart stores to a new entity through three replicas at once, each model call slower than the statement timeout: all served, one after another", async () => {
    fake.reset();
    fake.reply({
      delayMs: statementTimeoutMs + 500,
      answer: JSON.stringify({ operations: [{ fact: "User likes tea", decision: "ADD" }] }),
    });
    const results = await Promise.all(
      replicas.map((r) =>
        call(r, "POST", "/v1/memory", { namespace: "slow", entity: "new-entity", content: "I like tea" }),
      ),
    );
    // Serialised across replicas by the entity's lock row, never refused while waiting for it.
    expect(results.map((r) => r.status)).toEqual([200, 200, 200]);
    const listed = await call(replicas[0], "GET", "/v1/memory?namespace=slow&entity=new-entity");
    expect(listed.body.memories.map((m: any) => m.content)).toEqual(["User likes tea"]);
  }, 60_000);

  test("a key revoked through one replica is refused by the others within 1 s", async () => {
    const created = await call(replicas[0], "POST", "/v1/keys", {
      name: "agent",
      permission: "read",
      namespaces: ["burst"],
    });
    expect(created.status).toBe(201);
    const { id, secret } = created.body;
    const read = (r: Replica) =>
      call(r, "GET", "/v1/memory/events?namespace=burst&limit=1", undefined, { key: secret });
    expect((await Promise.all(replicas.map(read))).map((r) => r.status)).toEqual([200, 200, 200]);

    expect((await call(replicas[0], "DELETE", `/v1/keys/${id}`)).status).toBe(200);
    const revokedAt = Date.now();
    for (const r of replicas.slice(1)) {
      let last = 0;
      const refused = await until(1000 - (Date.now() - revokedAt), async () => {
        last = (await read(r)).status;
        return last === 401;
      });
      expect(`${r.name}: ${refused ? "refused" : `still answers ${last}`} within 1 s`).toBe(
        `${r.name}: refused within 1 s`,
      );
    }
  });

  test("the live event stream of one replica carries events written through the others, once, in order, promptly", async () => {
    const ac = new AbortController();
    const res = await fetch(`${replicas[0].url}/v1/memory/events/stream?namespace=streamed`, {
      headers: { authorization: `Bearer ${rootSecret}` },
      signal: ac.signal,
    });
    expect(res.status).toBe(200);
    const got: { content: string; at: number }[] = [];
    const reading = (async () => {
      try {
        for await (const m of sseMessages(res.body!))
          if (m.event === "memory") got.push({ content: JSON.parse(m.data!).newContent, at: Date.now() });
      } catch {} // aborted at the end
    })();
    const sent: { content: string; at: number }[] = [];
    for (let i = 0; i < 6; i++) {
      const content = `through ${i % 3} #${i}`;
      expect((await rawStore(replicas[1 + (i % 2)], "streamed", content)).status).toBe(200);
      sent.push({ content, at: Date.now() });
    }
    const deadline = Date.now() + 5000;
    while (got.length < sent.length && Date.now() < deadline) await Bun.sleep(20);
    ac.abort();
    await reading;
    expect(got.map((g) => g.content)).toEqual(sent.map((x) => x.content));
    // The stream polls every 500 ms, so an event arrives within about 0.5 s of its answer; the bound
    // here is looser (2 s) so that a loaded test machine cannot make it flaky.
    for (const [i, g] of got.entries()) expect(g.at - sent[i].at).toBeLessThan(2000);
  }, 30_000);

  test("TTL expiry with three sweepers records exactly one DELETE per memory", async () => {
    const ns = "ttl3";
    const stored = await Promise.all(
      Array.from({ length: 30 }, (_, i) => rawStore(replicas[i % 3], ns, `short-${i}`, { ttl: 1 })),
    );
    expect(stored.map((s) => s.status)).toEqual(Array(30).fill(200));
    const ids = stored.map((s) => s.body.memories[0].id as string);
    const lastExpiry = Math.max(...stored.map((s) => Date.parse(s.body.memories[0].expiresAt)));
    const deletes = async () =>
      (await call(replicas[2], "GET", `/v1/memory/events?namespace=${ns}&limit=1000`)).body.filter(
        (e: any) => e.event === "DELETE",
      );
    // Within the 2 s promise, then a few more sweeps of every replica to catch a late duplicate.
    expect(await until(lastExpiry + 2000 - Date.now(), async () => (await deletes()).length >= ids.length)).toBe(true);
    await Bun.sleep(1000);
    const got = await deletes();
    expect(got.map((e: any) => e.memoryId).sort()).toEqual([...ids].sort());
    expect(new Set(got.map((e: any) => e.reason))).toEqual(new Set(["expired"]));
  }, 30_000);

  test("kill -9 of one replica in the middle of a burst loses no acknowledged write", async () => {
    const victim = await startReplica("victim");
    extra.push(victim);
    const ns = "kill";
    const acked: string[] = [];
    let stop = false;
    const writer = (r: Replica, w: number) =>
      (async () => {
        for (let i = 0; !stop && i < 400; i++) {
          try {
            const res = await rawStore(r, ns, `${r.name}-${w}-${i}`);
            if (res.status === 200) acked.push(res.body.memories[0].id);
            else expect(r).toBe(victim); // only the killed replica may fail a request
          } catch {
            if (r !== victim) throw new Error(`${r.name} failed a request while another replica died`);
            return; // the victim's connection dropped
          }
        }
      })();
    const writers = [...replicas, victim].flatMap((r) => Array.from({ length: 8 }, (_, w) => writer(r, w)));
    expect(await until(10_000, async () => acked.length >= 100)).toBe(true);
    victim.proc.kill("SIGKILL");
    await victim.proc.exited;
    await Bun.sleep(200);
    stop = true;
    await Promise.all(writers);

    const events = await call(replicas[0], "GET", `/v1/memory/events?namespace=${ns}&limit=1000`);
    const added = new Set(events.body.filter((e: any) => e.event === "ADD").map((e: any) => e.memoryId));
    expect(acked.filter((id) => !added.has(id))).toEqual([]);
    const { seen } = await pageDiff(replicas[1], ns, "nextSince");
    expect(new Set(seen.map((s) => s.id)).size).toBe(seen.length);
    expect(acked.filter((id) => !seen.some((s) => s.id === id))).toEqual([]);
  }, 60_000);
});

test("raw stores grouped into one transaction: each lands whole, and a failing one fails only itself", async () => {
  const storage = await openPostgres({ url: databaseUrl, pool: 4, connectTimeoutMs: 5000, statementTimeoutMs: 5000 });
  try {
    const add = (content: string) => ({
      event: "ADD" as const,
      create: { id: Bun.randomUUIDv7(), namespace: "grouped", entity: "e", content, category: "c", importance: 0.5 },
    });
    // PostgreSQL's text cannot hold NUL: the 7th call fails inside whatever transaction it shares.
    const calls = Array.from({ length: 20 }, (_, i) =>
      storage.apply(i === 6 ? [add("bad\u0000")] : [add(`one ${i}`), add(`two ${i}`)], null),
    );
    const settled = await Promise.allSettled(calls);
    expect(settled.map((r) => r.status)).toEqual(settled.map((_, i) => (i === 6 ? "rejected" : "fulfilled")));
    // A call's events are stamped together (consecutive times); calls run in no promised order.
    for (const r of settled)
      if (r.status === "fulfilled") expect(r.value[1]!.event.atMs - r.value[0]!.event.atMs).toBe(1);
    const stored = await storage.eventsAfter({ namespace: "grouped" }, 0, 100);
    expect(stored.map((e) => e.newContent).sort()).toEqual(
      Array.from({ length: 20 }, (_, i) => (i === 6 ? [] : [`one ${i}`, `two ${i}`]))
        .flat()
        .sort(),
    );
  } finally {
    await storage.close();
  }
});

test("memd backup on PostgreSQL points to the database's own tools and copies nothing", () => {
  const dest = `${dir.dir}/backup`;
  const r = Bun.spawnSync([process.execPath, "run", "src/main.ts", "backup", dest, "--database-url", databaseUrl], {
    cwd: `${import.meta.dir}/../..`,
    stdout: "pipe",
    stderr: "pipe",
  });
  expect(r.exitCode).toBe(1);
  expect(r.stderr.toString()).toContain("back it up with the database's own tools (pg_dump");
  expect(existsSync(dest)).toBe(false);
});

describe("PostgreSQL stopped for 5 s in the middle of a run", () => {
  const pg = () => {
    const {
      MEMD_TEST_PG_BIN: bin,
      MEMD_TEST_PG_DATA: data,
      MEMD_TEST_PG_PORT: port,
      MEMD_TEST_PG_SOCKET: socket,
    } = process.env;
    if (!bin || !data || !port || !socket)
      throw new Error(
        "this test stops and restarts PostgreSQL, so it needs the private server of scripts/with-postgres (MEMD_TEST_PG_DATA is unset: a shared server given by MEMD_TEST_DATABASE_URL is never stopped)",
      );
    const asPg = process.env.MEMD_TEST_PG_USER ? ["runuser", "-u", process.env.MEMD_TEST_PG_USER, "--"] : [];
    const ctl = (...args: string[]) => {
      const r = Bun.spawnSync([...asPg, `${bin}/pg_ctl`, "-D", data, ...args], { stdout: "pipe", stderr: "pipe" });
      if (r.exitCode !== 0) throw new Error(`pg_ctl ${args.join(" ")}: ${r.stderr.toString()}${r.stdout.toString()}`);
    };
    return {
      stop: () => ctl("-m", "fast", "-w", "-t", "30", "stop"),
      // The same options as scripts/with-postgres.
      start: () =>
        ctl(
          "-l",
          `${socket}/server.log`,
          "-w",
          "-t",
          "30",
          "-o",
          `-p ${port} -k ${socket} -c listen_addresses=127.0.0.1 -c fsync=on -c synchronous_commit=on -c max_connections=300`,
          "start",
        ),
    };
  };

  test("requests answer 503 storage_unavailable within the statement timeout, /readyz 503, and service resumes without a restart", async () => {
    const server = pg();
    const ns = "outage";
    // No request may take longer than a connect attempt plus a statement, with slack for a busy machine.
    const bound = connectTimeoutMs + statementTimeoutMs + 3000;
    const statuses: { phase: string; status: number; code?: string }[] = [];
    const acked: string[] = [];
    let phase = "before";
    let stop = false;
    const writer = (r: Replica, w: number) =>
      (async () => {
        for (let i = 0; !stop; i++) {
          const p = phase;
          const res = await rawStore(r, ns, `${r.name}-${w}-${i}`, {}, bound).catch((e) => {
            throw new Error(`${r.name}: no answer within ${bound} ms (${p}): ${e}`);
          });
          statuses.push({ phase: p, status: res.status, code: res.body?.error?.code });
          if (res.status === 200) acked.push(res.body.memories[0].id);
          if (res.status !== 200) await Bun.sleep(50);
        }
      })();
    const writers = replicas.flatMap((r) => Array.from({ length: 4 }, (_, w) => writer(r, w)));
    // A smart store takes an entity's lock row on its own pool: that pool must come back too.
    fake.reset();
    fake.reply(JSON.stringify({ operations: [{ fact: "User likes tea", decision: "ADD" }] }));
    const smartBody = { namespace: ns, entity: "smart", content: "I like tea" };
    try {
      await until(5000, async () => acked.length >= 20);
      server.stop();
      phase = "down";
      const downAt = Date.now();
      const during = await Promise.all(
        replicas.map(async (r) => ({
          readyz: await call(r, "GET", "/readyz", undefined, { timeoutMs: bound }),
          read: await call(r, "GET", `/v1/memory/events?namespace=${ns}&limit=5`, undefined, { timeoutMs: bound }),
          smart: await call(r, "POST", "/v1/memory", smartBody, { timeoutMs: bound }),
        })),
      );
      for (const d of during) {
        expect([d.readyz.status, d.readyz.body.status]).toEqual([503, "not_ready"]);
        expect([d.read.status, d.read.body.error.code]).toEqual([503, "storage_unavailable"]);
        expect([d.smart.status, d.smart.body.error.code]).toEqual([503, "storage_unavailable"]);
      }
      await Bun.sleep(Math.max(0, 5000 - (Date.now() - downAt)));
      phase = "restarting";
      server.start();
      phase = "after";
    } catch (e) {
      // The writers stop (each within its bound) rather than run on into the next tests.
      stop = true;
      throw e;
    } finally {
      // Whatever happened above, the server must be back for the rest of the run.
      if (phase === "down") server.start();
    }
    // Every replica recovers by itself: writes, reads and /readyz succeed again.
    const recovered: Record<string, boolean> = {};
    for (const r of replicas)
      recovered[r.name] = await until(
        15_000,
        async () => {
          const w = await rawStore(r, ns, `${r.name}-after`, {}).catch(() => ({ status: 0, body: undefined }));
          if (w.status !== 200 || (await call(r, "GET", "/readyz")).status !== 200) return false;
          return (await call(r, "POST", "/v1/memory", smartBody)).status === 200;
        },
        100,
      );
    if (Object.values(recovered).includes(false)) stop = true; // the writers end before the failure is reported
    expect(recovered).toEqual(Object.fromEntries(replicas.map((r) => [r.name, true])));
    await Bun.sleep(300);
    stop = true;
    await Promise.all(writers);

    const bad = statuses.filter((s) => s.status !== 200 && !(s.status === 503 && s.code === "storage_unavailable"));
    expect(bad).toEqual([]);
    expect(statuses.some((s) => s.phase === "down" && s.status === 503)).toBe(true);
    expect(statuses.filter((s) => s.phase === "after" && s.status === 200).length).toBeGreaterThan(0);
    // Nothing acknowledged was lost, and the namespace still pages cleanly.
    const { seen } = await pageDiff(replicas[2], ns, "nextSince");
    expectStrictlyIncreasing(seen.map((s) => s.createdAt));
    const seenIds = new Set(seen.map((s) => s.id));
    expect(acked.filter((id) => !seenIds.has(id))).toEqual([]);
  }, 60_000);

  test("a database that stops answering (every PostgreSQL process frozen for 3 s) gives 503 within the bound, never a hang", async () => {
    const data = process.env.MEMD_TEST_PG_DATA;
    if (!data) throw new Error("this test freezes PostgreSQL, so it needs the private server of scripts/with-postgres");
    const postmaster = readFileSync(`${data}/postmaster.pid`, "utf8").split("\n")[0].trim();
    const children = Bun.spawnSync(["pgrep", "-P", postmaster]).stdout.toString().trim().split(/\s+/).filter(Boolean);
    const pids = [postmaster, ...children];
    const bound = connectTimeoutMs + statementTimeoutMs + 3000;
    const signal = (sig: string) => Bun.spawnSync(["kill", `-${sig}`, ...pids]);
    signal("STOP");
    try {
      fake.reset();
      fake.reply(JSON.stringify({ operations: [{ fact: "User likes tea", decision: "ADD" }] }));
      const post = (r: Replica, body: object) => call(r, "POST", "/v1/memory", body, { timeoutMs: bound });
      const answers = await Promise.all(
        replicas.flatMap((r) => [
          post(r, { namespace: "frozen", entity: "u", content: "x", infer: false }),
          post(r, { namespace: "frozen", entity: "u", content: "I like tea" }),
          call(r, "GET", "/v1/memory?namespace=frozen", undefined, { timeoutMs: bound }),
        ]),
      );
      for (const a of answers) expect([a.status, a.body.error?.code]).toEqual([503, "storage_unavailable"]);
      const ready = await Promise.all(replicas.map((r) => call(r, "GET", "/readyz", undefined, { timeoutMs: bound })));
      expect(ready.map((r) => r.status)).toEqual([503, 503, 503]);
    } finally {
      signal("CONT");
    }
    for (const r of replicas)
      expect(
        await until(
          15_000,
          async () => (await rawStore(r, "frozen", "after").catch(() => ({ status: 0 }))).status === 200,
          100,
        ),
      ).toBe(true);
    // What was answered 503 was never written, not even once the database answered again.
    const listed = await call(replicas[0], "GET", "/v1/memory?namespace=frozen&limit=1000");
    expect(new Set(listed.body.memories.map((m: any) => m.content))).toEqual(new Set(["after"]));
  }, 60_000);
});
