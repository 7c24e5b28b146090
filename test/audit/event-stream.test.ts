// @targets lmdb postgres pgbouncer binary
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { backend, rootSecret, spawnServer, startTestServer, type TestServer, tempDir, testBinary } from "../helpers";
import { type SseMessage, sseMessages, subscribe, within } from "../sse";

/** Raw stores through `connections` concurrent workers; answers the ids in the order they were answered. */
async function storeMany(
  url: string,
  n: number,
  connections: number,
  make: (i: number) => { namespace: string; entity: string; content: string },
) {
  const ids: string[] = [];
  let next = 0;
  const worker = async () => {
    while (next < n) {
      const i = next++;
      const res = await fetch(`${url}/v1/memory`, {
        method: "POST",
        headers: { authorization: `Bearer ${rootSecret}`, "content-type": "application/json" },
        body: JSON.stringify({ ...make(i), infer: false }),
      });
      if (res.status !== 200) throw new Error(`store ${i}: ${res.status} ${await res.text()}`);
      ids.push(((await res.json()) as any).memories[0].id);
    }
  };
  await Promise.all(Array.from({ length: connections }, worker));
  return ids;
}

/** Every event exactly once, oldest first: strictly increasing times and ids, no repeats. */
function expectExactlyOnceInOrder(events: { id: string; event: any }[], memoryIds: string[]) {
  const seen = events.map((e) => e.event.memoryId);
  expect(new Set(seen).size).toBe(seen.length);
  expect(new Set(seen)).toEqual(new Set(memoryIds));
  for (let i = 1; i < events.length; i++) {
    expect(Date.parse(events[i].event.createdAt)).toBeGreaterThan(Date.parse(events[i - 1].event.createdAt));
    expect(Number(events[i].event.id)).toBeGreaterThan(Number(events[i - 1].event.id));
  }
}

describe("event stream, in process", () => {
  let s: TestServer;
  let readKeyA: string;
  beforeAll(async () => {
    s = await startTestServer({ env: { MEMD_STREAM_KEEPALIVE_MS: "50" } });
    const k = await s.json("POST", "/v1/keys", { name: "reader-a", permission: "read", namespaces: ["a"] });
    readKeyA = k.body.secret;
  });
  afterAll(() => s.stop());

  test("5 subscribers get 2,000 stores from 16 connections exactly once, in order; one drops and resumes", async () => {
    const subs = await Promise.all(Array.from({ length: 5 }, () => subscribe(s.url, rootSecret, "namespace=load")));
    const entitySub = await subscribe(s.url, rootSecret, "namespace=load&entity=e3");
    const dropper = await subscribe(s.url, rootSecret, "namespace=load");
    const writing = storeMany(s.url, 2000, 16, (i) => ({
      namespace: "load",
      entity: `e${i % 7}`,
      content: `fact ${i}`,
    }));
    // The dropper leaves in the middle and comes back with the last id it processed.
    await dropper.until(700);
    dropper.close();
    await dropper.done;
    const kept = dropper.events.slice();
    const resumed = await subscribe(s.url, rootSecret, "namespace=load", { "last-event-id": kept.at(-1)!.id });
    const ids = await writing;
    for (const sub of subs) await sub.until(2000);
    await resumed.until(2000 - kept.length);
    for (const sub of subs) {
      expect(sub.events.length).toBe(2000);
      expectExactlyOnceInOrder(sub.events, ids);
    }
    expectExactlyOnceInOrder([...kept, ...resumed.events], ids);
    // The entity stream: that entity's events only, all of them.
    const e3 = subs[0].events.filter((e) => e.event.entity === "e3");
    await entitySub.until(e3.length);
    expect(entitySub.events.map((e) => e.id)).toEqual(e3.map((e) => e.id));
    // Each message carries the event exactly as the events endpoint shows it.
    const listed = await s.json("GET", "/v1/memory/events?namespace=load&limit=3");
    expect(subs[1].events.slice(-3).map((e) => e.event)).toEqual(listed.body.reverse());
    for (const sub of [...subs, entitySub, resumed]) sub.close();
  }, 120_000);

  test("after=, since= and Last-Event-ID replay from where they say, then go live", async () => {
    await storeMany(s.url, 5, 1, (i) => ({ namespace: "replay", entity: "e", content: `replay ${i}` }));
    const all = await subscribe(s.url, rootSecret, "namespace=replay&since=2000-01-01");
    await all.until(5);
    const [c0, c1, c2] = all.events.map((e) => e.id);
    const times = all.events.map((e) => e.event.createdAt);

    const after = await subscribe(s.url, rootSecret, `namespace=replay&after=${c2}`);
    await after.until(2);
    expect(after.events.map((e) => e.id)).toEqual(all.events.slice(3).map((e) => e.id));

    const since = await subscribe(s.url, rootSecret, `namespace=replay&since=${times[1]}`);
    await since.until(3);
    expect(since.events.map((e) => e.id)).toEqual(all.events.slice(2).map((e) => e.id));

    // A reconnecting EventSource repeats its URL and adds Last-Event-ID: the header wins.
    const header = await subscribe(s.url, rootSecret, `namespace=replay&after=${c0}`, { "last-event-id": c1 });
    await header.until(3);
    expect(header.events.map((e) => e.id)).toEqual(all.events.slice(2).map((e) => e.id));

    // Without a cursor or time: only what comes next.
    const live = await subscribe(s.url, rootSecret, "namespace=replay");
    const subs = [all, after, since, header];
    const counts = subs.map((sub) => sub.events.length);
    await storeMany(s.url, 1, 1, () => ({ namespace: "replay", entity: "e", content: "live one" }));
    await live.until(1);
    for (const [i, sub] of subs.entries()) await sub.until(counts[i] + 1);
    expect(live.events.map((e) => e.event.newContent)).toEqual(["live one"]);
    for (const sub of [all, after, since, header]) expect(sub.events.at(-1)!.event.newContent).toBe("live one");
    for (const sub of [all, after, since, header, live]) sub.close();
  });

  test("a keepalive comment on an idle stream (short interval)", async () => {
    const sub = await subscribe(s.url, rootSecret, "namespace=quiet");
    await within(
      10_000,
      "a keepalive",
      (async () => {
        while (!sub.all.some((m) => m.comments.includes("keepalive"))) await Bun.sleep(10);
      })(),
    );
    expect(sub.events).toEqual([]);
    sub.close();
  });

  test.each([
    ["no key", "namespace=a", null, {}, 401, "unauthorized"],
    ["foreign namespace", "namespace=b", "readA", {}, 403, "forbidden"],
    ["namespace missing", "entity=x", "root", {}, 400, "invalid_request"],
    ["unknown parameter", "namespace=a&limit=3", "root", {}, 400, "invalid_request"],
    ["malformed after", "namespace=a&after=nope", "root", {}, 400, "after"],
    ["after of another namespace", "namespace=b&after=CURSOR_A", "root", {}, 400, "another namespace"],
    [
      "Last-Event-ID of another namespace",
      "namespace=b",
      "root",
      { "last-event-id": "CURSOR_A" },
      400,
      "Last-Event-ID",
    ],
    ["after and since", "namespace=a&after=CURSOR_A&since=2020-01-01", "root", {}, 400, "not both"],
    ["bad since", "namespace=a&since=yesterday", "root", {}, 400, "since"],
  ] as const)("%s", async (_name, query, who, headers, status, fragment) => {
    // A real cursor of namespace a, from a replay.
    await storeMany(s.url, 1, 1, () => ({ namespace: "a", entity: "e", content: "in a" }));
    const src = await subscribe(s.url, rootSecret, "namespace=a&since=2000-01-01");
    await src.until(1);
    src.close();
    const cursorA = src.events[0].id;
    const fill = (v: string) => v.replace("CURSOR_A", cursorA);
    const key = who === null ? null : who === "root" ? rootSecret : readKeyA;
    const res = await s.api("GET", `/v1/memory/events/stream?${fill(query)}`, undefined, {
      key,
      headers: Object.fromEntries(Object.entries(headers).map(([k, v]) => [k, fill(v)])),
    });
    expect(res.status).toBe(status);
    expect(await res.text()).toContain(fragment);
  });

  test("a scoped read key streams its own namespace", async () => {
    const sub = await subscribe(s.url, readKeyA, "namespace=a&since=2000-01-01");
    await sub.until(1);
    expect(sub.events[0].event.namespace).toBe("a");
    sub.close();
  });
});

test("a stream ends with event: error (unauthorized) once its key is revoked, and a new one is refused", async () => {
  const s = await startTestServer();
  try {
    const created = await s.json("POST", "/v1/keys", { name: "follower", permission: "read", namespaces: ["r"] });
    const { id, secret } = created.body;
    const sub = await subscribe(s.url, secret, "namespace=r");
    expect((await s.json("DELETE", `/v1/keys/${id}`)).status).toBe(200);
    // Revoked through this server: the stream ends at its next look at the trail (a poll, 0.5 s).
    await within(5_000, "stream end after revocation", sub.done);
    const error = sub.all.find((m) => m.event === "error");
    expect(JSON.parse(error!.data!)).toEqual({ code: "unauthorized", message: "the key was revoked or has expired" });
    expect(
      (await fetch(`${s.url}/v1/memory/events/stream?namespace=r`, { headers: { authorization: `Bearer ${secret}` } }))
        .status,
    ).toBe(401);
  } finally {
    await s.stop();
  }
});

test("stopping the server ends open streams cleanly", async () => {
  const s = await startTestServer();
  const sub = await subscribe(s.url, rootSecret, "namespace=x");
  // In process, the hub holds it (the binary's hub lives in its own process).
  if (!testBinary) expect(s.server.streams.size).toBe(1);
  await within(10_000, "server stop", s.stop());
  await within(5_000, "stream end", sub.done);
});

/** Anonymous resident memory of a process (heap, buffers), without LMDB's file-backed pages. */
const rssAnonMb = (pid: number) =>
  Number(/RssAnon:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))![1]) / 1024;

// Its own LMDB server process: the same on any backend run, so it runs in the LMDB pass only.
test.skipIf(backend === "postgres")(
  "a consumer that never reads is cut off with overflow; server memory stays bounded; resume loses nothing",
  async () => {
    const tmp = tempDir();
    // Without the built-in embedder: this is about the stream's buffer, and embedding 33,000 texts
    // of 4 KB (and holding their vectors) would take most of the time and memory measured here.
    const server = await spawnServer(["--data-dir", tmp.dir], {
      MEMD_API_KEY: rootSecret,
      MEMD_LOG_LEVEL: "info",
      MEMD_EMBEDDER: "none",
    });
    const go = join(tmp.dir, "..", `${tmp.dir.split("/").pop()}.go`);
    try {
      const url = `${server.url}/v1/memory/events/stream?namespace=big`;
      // curl writes into a pipe that nobody reads until `go` exists: the socket stops draining, as with a stuck client.
      const stuck = Bun.spawn(
        [
          "sh",
          "-c",
          `curl -sN -H "authorization: Bearer ${rootSecret}" "${url}" | { while [ ! -e "${go}" ]; do sleep 0.05; done; cat; }`,
        ],
        { stdout: "pipe", stderr: "pipe" },
      );
      const n = 30_000;
      const pad = "x".repeat(4096);
      // Warm up the server's allocator on the same load before measuring.
      await storeMany(server.url, 3000, 16, (i) => ({ namespace: "warm", entity: "e", content: `${i} ${pad}` }));
      await Bun.sleep(200);
      const before = rssAnonMb(server.proc.pid);
      const ids = await storeMany(server.url, n, 16, (i) => ({
        namespace: "big",
        entity: `e${i % 5}`,
        content: `${i} ${pad}`,
      }));
      const after = rssAnonMb(server.proc.pid);
      // n events of ~4.3 KB each are ~130 MB of stream: a server that buffered them all would grow by that much.
      // The buffer is 10,000 events or 8 MiB, whichever fills first. The rest of the growth is the
      // allocator's after 30,000 stores, which varied from 15 to 81 MB with the machine's load
      // (make test beside other work): the bound sits below the ~130 MB that buffering would add.
      console.log(`server RssAnon ${before.toFixed(1)} MB -> ${after.toFixed(1)} MB with a stuck subscriber`);
      expect(after - before).toBeLessThan(105);

      writeFileSync(go, "");
      const messages: SseMessage[] = [];
      for await (const m of sseMessages(stuck.stdout)) messages.push(m);
      await within(10_000, "curl exit", stuck.exited);
      const got = messages.filter((m) => m.event === "memory");
      const overflow = messages.at(-1)!;
      expect(overflow.event).toBe("overflow");
      expect(got.length).toBeGreaterThan(0);
      expect(got.length).toBeLessThan(n);
      const cursor = JSON.parse(overflow.data!).cursor;
      expect(cursor).toBe(got.at(-1)!.id);

      const rest = await subscribe(server.url, rootSecret, `namespace=big&after=${cursor}`);
      await rest.until(n - got.length, 120_000);
      rest.close();
      expectExactlyOnceInOrder([...got.map((m) => ({ id: m.id!, event: JSON.parse(m.data!) })), ...rest.events], ids);
    } finally {
      server.proc.kill("SIGTERM");
      await within(15_000, "server exit", server.proc.exited);
      if (existsSync(go)) tmp.cleanup();
      tmp.cleanup();
      Bun.spawnSync(["rm", "-f", go]);
    }
  },
  240_000,
);
