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
    // Slow answers: a POST is in flight most of the time.
    receiver.answer = { status: 200, delayMs: 15 };
    for (let i = 0; i < 60; i++) {
      const r = await call(p.url, "POST", "/v1/memory", {
        namespace: `crash/${i % 3}`,
        entity: "e",
        content: `fact ${i}`,
        infer: false,
      });
      expect(r.status).toBe(200);
    }
    const deadline = Date.now() + 20_000;
    while (receiver.accepted.length < 20 && Date.now() < deadline) await Bun.sleep(5);
    expect(receiver.accepted.length).toBeGreaterThanOrEqual(20);
    p.proc.kill("SIGKILL");
    await p.proc.exited;
    const atKill = receiver.accepted.length;
    expect(atKill).toBeLessThan(60);

    p = await spawnServer(args, env);
    const seqs: number[] = [];
    for (let n = 0; n < 3; n++) {
      const ev = await call(p.url, "GET", `/v1/memory/events?namespace=crash/${n}&limit=1000`);
      seqs.push(...(ev.body as { id: string }[]).map((e) => Number(e.id)));
    }
    seqs.sort((a, b) => a - b);
    expect(seqs.length).toBe(60);
    receiver.answer = { status: 200, delayMs: 0 };
    await receiver.waitFor(seqs);
    expect(checkDeliveries(receiver.accepted, seqs)).toEqual([]);
  } finally {
    p.proc.kill("SIGKILL");
    await p.proc.exited;
  }
});
