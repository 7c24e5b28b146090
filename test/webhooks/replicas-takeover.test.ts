// @targets postgres pgbouncer
// Three memd replicas on one PostgreSQL database (through PgBouncer in transaction mode on that
// target): one delivers a subscription, holding its lease row; killed with SIGKILL, another takes
// over within seconds and goes on from the stored cursor. Every event delivered, in order,
// repeats only with their first webhook-id, and only one replica delivered at a time.
import { afterAll, expect, test } from "bun:test";
import { backendArgs, rootSecret, type ServerProcess, spawnServer, tempDir } from "../helpers";
import { checkDeliveries, startReceiver } from "./receiver";

const tmp = tempDir();
const receiver = startReceiver();
const replicas: ServerProcess[] = [];
afterAll(async () => {
  for (const p of replicas) if (p.proc.exitCode === null) p.proc.kill("SIGKILL");
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

/** Which replica's log says it took the lease of `id` (the pid it logs). */
const holder = (id: string) =>
  replicas.findIndex(
    (p) => !p.proc.killed && p.stdout().includes(`"webhook":"${id}"`) && p.stdout().includes("lease taken"),
  );

test("three replicas, the delivering one killed: another takes over within seconds, nothing lost or reordered", async () => {
  const args = ["--data-dir", tmp.dir, ...(await backendArgs(tmp.dir)), ...fast];
  const env = { MEMD_API_KEY: rootSecret };
  replicas.push(...(await Promise.all([0, 1, 2].map(() => spawnServer(args, env)))));
  const made = await call(replicas[0].url, "POST", "/v1/webhooks", { url: receiver.url, namespaces: "*" });
  expect(made.status).toBe(201);
  receiver.secret = made.body.secret;
  receiver.answer = { status: 200, delayMs: 10 };
  // Stores through every replica, into several namespaces.
  const store = (i: number) =>
    call(replicas[i % 3].url, "POST", "/v1/memory", {
      namespace: `r${i % 4}`,
      entity: "e",
      content: `fact ${i}`,
      infer: false,
    });
  for (let i = 0; i < 30; i++) expect((await store(i)).status).toBe(200);
  const deadline = Date.now() + 20_000;
  while (receiver.accepted.length < 5 && Date.now() < deadline) await Bun.sleep(10);
  const first = holder(made.body.id);
  expect(first).toBeGreaterThanOrEqual(0);
  replicas[first].proc.kill("SIGKILL");
  await replicas[first].proc.exited;
  const alive = [0, 1, 2].filter((i) => i !== first);
  for (let i = 30; i < 60; i++) {
    const r = await call(replicas[alive[i % 2]].url, "POST", "/v1/memory", {
      namespace: `r${i % 4}`,
      entity: "e",
      content: `fact ${i}`,
      infer: false,
    });
    expect(r.status).toBe(200);
  }
  const seqs: number[] = [];
  for (let n = 0; n < 4; n++) {
    const ev = await call(replicas[alive[0]].url, "GET", `/v1/memory/events?namespace=r${n}&limit=1000`);
    seqs.push(...(ev.body as { id: string }[]).map((e) => Number(e.id)));
  }
  seqs.sort((a, b) => a - b);
  expect(seqs.length).toBe(60);
  receiver.answer = { status: 200, delayMs: 0 };
  await receiver.waitFor(seqs, 30_000);
  expect(checkDeliveries(receiver.accepted, seqs)).toEqual([]);
  expect(alive).toContain(holder(made.body.id));
});
