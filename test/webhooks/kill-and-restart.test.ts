// @targets lmdb postgres pgbouncer binary
// memd killed with SIGKILL while it delivers (a POST in flight, cursor moves half done), then
// started again on the same store: every event delivered, in order, duplicates only by id.
import { afterAll, expect, test } from "bun:test";
import { backendArgs, rootSecret, spawnServer, tempDir } from "../helpers";
import { checkDeliveries, startReceiver } from "./receiver";

const tmp = tempDir();
const receiver = startReceiver();
afterAll(async () => {
  await receiver.stop();
  tmp.cleanup();
});

const fast = ["--webhook-allow-private", "--webhook-retry-base-ms", "20", "--webhook-retry-max-ms", "200"];

async function call(url: string, method: string, path: string, body?: unknown) {
  const res = await fetch(url + path, {
    method,
    headers: { authorization: `Bearer ${rootSecret}`, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as any };
}

test("kill -9 mid-delivery, restart: every event delivered in order, repeats only with their first webhook-id", async () => {
  const args = ["--data-dir", tmp.dir, ...(await backendArgs(tmp.dir)), ...fast];
  const env = { MEMD_API_KEY: rootSecret };
  let p = await spawnServer(args, env);
  try {
    const made = await call(p.url, "POST", "/v1/webhooks", { url: receiver.url, namespaces: "crash/*" });
    expect(made.status).toBe(201);
    receiver.secret = made.body.secret;
    // Slow answers: a POST is in flight most of the time. Once 20 are in, the next one is held
    // (answered 503 after 10 s), so the kill comes mid-delivery however fast the stores went.
    receiver.answer = { status: 200, delayMs: 15 };
    const deadline = Date.now() + 20_000;
    const held = (async () => {
      while (receiver.accepted.length < 20 && Date.now() < deadline) await Bun.sleep(2);
      receiver.answer = { status: 503, delayMs: 10_000 };
    })();
    for (let i = 0; i < 60; i++) {
      const r = await call(p.url, "POST", "/v1/memory", {
        namespace: `crash/${i % 3}`,
        entity: "e",
        content: `fact ${i}`,
        infer: false,
      });
      expect(r.status).toBe(200);
    }
    await held;
    expect(receiver.accepted.length).toBeGreaterThanOrEqual(20);
    p.proc.kill("SIGKILL");
    await p.proc.exited;
    const atKill = receiver.accepted.length;
    expect(atKill).toBeLessThan(60);
    receiver.answer = { status: 200, delayMs: 0 };

    p = await spawnServer(args, env);
    const seqs: number[] = [];
    for (let n = 0; n < 3; n++) {
      const ev = await call(p.url, "GET", `/v1/memory/events?namespace=crash/${n}&limit=1000`);
      seqs.push(...(ev.body as { id: string }[]).map((e) => Number(e.id)));
    }
    seqs.sort((a, b) => a - b);
    expect(seqs.length).toBe(60);
    await receiver.waitFor(seqs);
    expect(checkDeliveries(receiver.accepted, seqs)).toEqual([]);
  } finally {
    p.proc.kill("SIGKILL");
    await p.proc.exited;
  }
});

test("an erasure the last thing written, kill -9, restart: delivered once, and the next event's seq is above it", async () => {
  const dir = tempDir();
  const r = startReceiver();
  const args = ["--data-dir", dir.dir, ...(await backendArgs(dir.dir)), ...fast];
  const env = { MEMD_API_KEY: rootSecret };
  let p = await spawnServer(args, env);
  try {
    const made = await call(p.url, "POST", "/v1/webhooks", { url: r.url, namespaces: "gone" });
    expect(made.status).toBe(201);
    r.secret = made.body.secret;
    const stored = await call(p.url, "POST", "/v1/memory", {
      namespace: "gone",
      entity: "erin",
      content: "erin's phone is 555-0199",
      infer: false,
    });
    expect(stored.status).toBe(200);
    expect((await call(p.url, "DELETE", `/v1/memory/${stored.body.memories[0].id}`)).status).toBe(200);
    expect((await call(p.url, "POST", "/v1/memory/erase", { namespace: "gone", entity: "erin" })).status).toBe(200);
    const deadline = Date.now() + 20_000;
    while (!r.accepted.some((a) => a.type === "entity.erased") && Date.now() < deadline) await Bun.sleep(10);
    const erasure = r.accepted.find((a) => a.type === "entity.erased");
    expect(erasure).toBeDefined();
    p.proc.kill("SIGKILL");
    await p.proc.exited;

    p = await spawnServer(args, env);
    const after = await call(p.url, "POST", "/v1/memory", {
      namespace: "gone",
      entity: "frank",
      content: "frank likes tea",
      infer: false,
    });
    expect(after.status).toBe(200);
    const ev = await call(p.url, "GET", "/v1/memory/events?namespace=gone&limit=100");
    const seqs = (ev.body as { id: string }[]).map((e) => Number(e.id)).sort((a, b) => a - b);
    expect(seqs.length).toBe(3);
    expect(seqs[2]).toBeGreaterThan(erasure!.seq);
    await r.waitFor(seqs);
    expect(checkDeliveries(r.accepted, [...seqs, erasure!.seq])).toEqual([]);
    expect([...new Set(r.accepted.filter((a) => a.type === "entity.erased").map((a) => a.id))]).toEqual([erasure!.id]);
    expect(new Set(r.accepted.map((a) => a.seq)).size).toBe(4);
  } finally {
    p.proc.kill("SIGKILL");
    await p.proc.exited;
    await r.stop();
    dir.cleanup();
  }
});
