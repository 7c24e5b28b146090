// @targets postgres pgbouncer
// Replicas ready at start (issue 32): a replica that builds a namespace's keyword lists writes them
// to the database (storage/postgres/snapshots.ts), and a replica started later reads them before
// it reports ready, caught up with every change committed since: its first search answers from
// memory, equal to the SQL path's. An erasure deletes the namespace's snapshot in its transaction,
// and the one written after it holds none of the erased words. A replica killed (kill -9) in the
// middle of writing a snapshot leaves the one before it whole: the next replica reads that one and
// catches up, so it answers as the SQL path does.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { SQL } from "bun";
import {
  freshDatabase,
  metricIn,
  poolerUrl,
  rootSecret,
  type ServerProcess,
  spawnServer,
  tempDir,
  throughPooler,
} from "../helpers";

const dir = tempDir("memd-pg-snapshots-");
let direct = "";
let url = "";
let db: SQL;
let a: ServerProcess;
let sqlOnly: ServerProcess;
const running: ServerProcess[] = [];
const ns = "snap";

async function call(s: { url: string }, method: string, path: string, body?: unknown) {
  const res = await fetch(s.url + path, {
    method,
    headers: {
      authorization: `Bearer ${rootSecret}`,
      ...(body === undefined ? {} : { "content-type": "application/json" }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(30_000),
  });
  const text = await res.text();
  const json = res.headers.get("content-type")?.includes("application/json");
  return { status: res.status, body: json && text ? (JSON.parse(text) as any) : undefined, text };
}

/** A replica on the shared database (keyword only: no embedder writing vectors in the background). */
async function start(name: string, env: Record<string, string> = {}) {
  const s = await spawnServer(
    [
      "--database-url",
      url,
      ...(poolerUrl() ? ["--database-pooler", "transaction"] : []),
      "--data-dir",
      `${dir.dir}/${name}`,
    ],
    { MEMD_API_KEY: rootSecret, MEMD_EMBEDDER: "none", MEMD_PG_SNAPSHOT_FROM: "20", ...env },
  );
  running.push(s);
  return s;
}

/** Gauge or counter `name` of a server's /metrics. */
async function metric(s: ServerProcess, name: string): Promise<number> {
  return metricIn((await call(s, "GET", "/metrics")).text, name);
}

/** Waits (bounded, 60 s) for `check` to hold. */
async function until(what: string, check: () => Promise<boolean>) {
  const deadline = Date.now() + 60_000;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`not within 60 s: ${what}`);
    await Bun.sleep(50);
  }
}

const ready = (s: ServerProcess) => until("ready", async () => (await call(s, "GET", "/readyz")).status === 200);

/** A keyword search's answer as contents and scores (to 9 places). */
async function search(s: ServerProcess, query: string) {
  const r = await call(s, "POST", "/v1/memory/search", { namespace: ns, query, mode: "keyword", limit: 10 });
  expect(r.status).toBe(200);
  return (r.body.results as any[]).map((h) => [h.content, Number(h.score).toFixed(9)]);
}

const store = async (entity: string, content: string) => {
  const r = await call(a, "POST", "/v1/memory", { namespace: ns, entity, content, infer: false });
  expect(r.status).toBe(200);
  return r.body.memories[0].id as string;
};

/** The namespace's snapshot row (its clock time), if any. */
const snapshotUpto = async (): Promise<number | undefined> => {
  const [r] = await db`SELECT upto FROM search_snapshots WHERE namespace = ${ns} AND kind = 'keyword'`;
  return r ? Number(r.upto) : undefined;
};

/** Whether the namespace's snapshots hold `word` (a term: the header holds the terms), in a row or a part. */
const partsHold = async (word: string): Promise<boolean> => {
  const [r] = await db`SELECT
      (SELECT count(*) FROM search_snapshots WHERE namespace = ${ns} AND position(${word} IN header) > 0) +
      (SELECT count(*) FROM search_snapshot_parts
        WHERE namespace = ${ns} AND position(convert_to(${word}, 'UTF8') IN data) > 0) AS n`;
  return Number(r.n) > 0;
};

beforeAll(async () => {
  direct = await freshDatabase();
  url = throughPooler(direct);
  db = new SQL({ url: direct, max: 2 });
  [a, sqlOnly] = await Promise.all([start("a"), start("sql", { MEMD_PG_KEYWORD_LISTS: "false" })]);
}, 120_000);

afterAll(async () => {
  for (const s of running) s.proc.kill("SIGKILL");
  await Promise.all(running.map((s) => s.proc.exited));
  await db?.close();
  dir.cleanup();
});

const words = ["tea", "piano", "garden", "river", "lamp", "violet", "harbour", "cedar"];

describe("keyword lists persisted in PostgreSQL", () => {
  test("a replica started later reads them before it is ready, caught up with the changes since", async () => {
    for (let i = 0; i < 60; i++)
      await store(`user${i % 5}`, `memory ${i} about ${words[i % words.length]} and ${words[(i * 3) % words.length]}`);
    // A builds its lists at its first search and, past 20 memories, writes them.
    await until("A's lists built", async () => {
      await search(a, "tea");
      return (await metric(a, "memd_pg_keyword_namespaces")) === 1;
    });
    await until("A's snapshot written", async () => (await snapshotUpto()) !== undefined);
    expect(await metric(a, "memd_pg_keyword_snapshots_written_total")).toBe(1);
    // Changes after the snapshot: new memories (one with a new word), a delete.
    const gone = await store("user1", "a tea memory deleted after the snapshot");
    await store("user2", "zephyr tea stored after the snapshot");
    expect((await call(a, "DELETE", `/v1/memory/${gone}?namespace=${ns}`)).status).toBeLessThan(300);

    const b = await start("b");
    await ready(b);
    // Ready: it holds the lists already, read from the snapshot, not built from the memories.
    expect(await metric(b, "memd_pg_keyword_namespaces")).toBe(1);
    expect(await metric(b, "memd_pg_keyword_snapshots_read_total")).toBe(1);
    for (const q of ["tea", "zephyr", "deleted", "piano garden", "memory 7"]) {
      const got = await search(b, q);
      expect({ q, got }).toEqual({ q, got: await search(sqlOnly, q) });
    }
    expect((await search(b, "zephyr")).map(([c]) => c)).toEqual(["zephyr tea stored after the snapshot"]);
    expect(await search(b, "deleted")).toEqual([]);
    // Its first search answered from memory: still one namespace, no build started.
    expect(await metric(b, "memd_pg_keyword_snapshots_read_total")).toBe(1);
  }, 180_000);

  test("an erasure deletes the snapshot; the next one written holds none of the erased words", async () => {
    await store("eve", "eve keeps a quokka named ziggurat in the garden");
    await search(a, "quokka"); // A's lists follow it
    // Written again once a quarter of the namespace changed: more memories, then a search.
    for (let i = 0; i < 20; i++) await store("user3", `filler ${i} about ${words[i % words.length]}`);
    await until("a snapshot holding eve's words", async () => {
      await search(a, "garden");
      return partsHold("ziggurat");
    });
    const r = await call(a, "POST", "/v1/memory/erase", { namespace: ns, entity: "eve" });
    expect(r.status).toBeLessThan(300);
    expect(await snapshotUpto()).toBeUndefined();
    expect(await partsHold("ziggurat")).toBe(false);
    // A writes its lists again at its next search, after following the erasure.
    await until("A's snapshot written again", async () => {
      await search(a, "garden");
      return (await snapshotUpto()) !== undefined;
    });
    expect(await partsHold("ziggurat")).toBe(false);
    expect(await partsHold("quokka")).toBe(false);
    // A replica started now reads it: eve's memory is in no answer.
    const c = await start("c");
    await ready(c);
    expect(await metric(c, "memd_pg_keyword_snapshots_read_total")).toBe(1);
    expect(await search(c, "quokka ziggurat")).toEqual([]);
    expect(await search(c, "garden")).toEqual(await search(sqlOnly, "garden"));
  }, 180_000);
});

describe("a replica killed while it writes a snapshot", () => {
  test("leaves the last whole snapshot: the next replica reads it and catches up (no partial or stale answer)", async () => {
    const kns = "killed";
    const keep = (s: ServerProcess, entity: string, content: string) =>
      call(s, "POST", "/v1/memory", { namespace: kns, entity, content, infer: false }).then((r) => {
        expect(r.status).toBe(200);
        return r.body.memories[0].id as string;
      });
    const find = async (s: ServerProcess, query: string) => {
      const r = await call(s, "POST", "/v1/memory/search", { namespace: kns, query, mode: "keyword", limit: 10 });
      expect(r.status).toBe(200);
      return (r.body.results as any[]).map((h) => [h.content, Number(h.score).toFixed(9)]);
    };
    const row = async () => {
      const [r] =
        await db`SELECT token, parts, upto FROM search_snapshots WHERE namespace = ${kns} AND kind = 'keyword'`;
      return r as { token: string; parts: number; upto: string } | undefined;
    };
    const k = await start("k");
    for (let i = 0; i < 40; i++) await keep(k, `user${i % 4}`, `note ${i} on ${words[i % words.length]}`);
    await until("K's first snapshot written", async () => {
      await find(k, "tea");
      return (await row()) !== undefined;
    });
    const first = (await row())!;
    // Changes after it (more than a quarter of the namespace: K writes again at its next search).
    const gone = await keep(k, "user1", "a cedar note deleted after the first snapshot");
    for (let i = 0; i < 15; i++) await keep(k, "user2", `later ${i} on ${words[(i * 3) % words.length]}`);
    await keep(k, "user3", "quasar cedar stored after the first snapshot");
    expect((await call(k, "DELETE", `/v1/memory/${gone}?namespace=${kns}`)).status).toBeLessThan(300);

    // Hold the snapshot's row: K's next write stops at its last statement (parts written, the old
    // parts deleted, the row to replace), uncommitted. Then K is killed there.
    let release!: () => void;
    let held!: () => void;
    const holding = new Promise<void>((r) => {
      held = r;
    });
    const holder = db.begin(async (tx) => {
      await tx`SELECT token FROM search_snapshots WHERE namespace = ${kns} AND kind = 'keyword' FOR UPDATE`;
      held();
      await new Promise<void>((r) => {
        release = r;
      });
    });
    await holding;
    await find(k, "cedar"); // catches up: a quarter changed, so it writes
    await until("K's second write waiting on the row", async () => {
      const [w] = await db`SELECT count(*)::int AS n FROM pg_stat_activity
          WHERE wait_event_type = 'Lock' AND query LIKE 'INSERT INTO search_snapshots%'`;
      return w.n > 0;
    });
    k.proc.kill("SIGKILL");
    await k.proc.exited;
    release();
    await holder;
    // The killed write is rolled back (its client is gone): the clock row it held is free again.
    await until("the killed transaction gone", async () => {
      try {
        await db.begin((tx) => tx`SELECT 1 FROM namespace_clock WHERE namespace = ${kns} FOR UPDATE NOWAIT`);
        return true;
      } catch {
        return false;
      }
    });
    // Only the first snapshot, whole: its row and every one of its parts, no other part.
    expect(await row()).toEqual(first);
    const [parts] = await db`SELECT count(*) FILTER (WHERE token = ${first.token})::int AS mine,
        count(*) FILTER (WHERE token <> ${first.token})::int AS other
      FROM search_snapshot_parts WHERE namespace = ${kns} AND kind = 'keyword'`;
    expect(parts).toEqual({ mine: Number(first.parts), other: 0 });

    const next = await start("after-kill");
    await ready(next);
    const [n] = await db`SELECT count(*)::int AS n FROM search_snapshots WHERE kind = 'keyword'`;
    expect(await metric(next, "memd_pg_keyword_snapshots_read_total")).toBe(n.n);
    for (const q of ["cedar", "quasar", "deleted", "tea piano", "note 7"]) {
      const got = await find(next, q);
      expect({ q, got }).toEqual({ q, got: await find(sqlOnly, q) });
    }
    expect((await find(next, "quasar")).map(([c]) => c)).toEqual(["quasar cedar stored after the first snapshot"]);
    expect(await find(next, "deleted")).toEqual([]);
  }, 180_000);
});
