// @targets postgres
// Two memd replicas on one PostgreSQL database: an erasure answered by the replica that does not
// deliver reaches nothing sent after its answer. The delivering replica read the erased event
// before the erasure (with the one before it, whose POST the receiver holds); it learns of the
// erasure only from the database (the count of committed erasures), not from its own commits.
import { afterAll, expect, test } from "bun:test";
import { call as callAs } from "../binary-helpers";
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

const call = (url: string, method: string, path: string, body?: unknown) => callAs(url, rootSecret, method, path, body);

test("another replica's erasure, answered while a POST is held: the erased event read before it is sent scrubbed", async () => {
  const args = ["--data-dir", tmp.dir, ...(await backendArgs(tmp.dir)), "--webhook-allow-private"];
  const env = { MEMD_API_KEY: rootSecret, MEMD_EMBEDDER: "none" };
  replicas.push(...(await Promise.all([0, 1].map(() => spawnServer(args, env)))));
  const [a] = replicas;
  const made = await call(a.url, "POST", "/v1/webhooks", { url: receiver.url, namespaces: "crm" });
  expect(made.status).toBe(201);
  receiver.secret = made.body.secret;
  expect((await call(a.url, "PATCH", `/v1/webhooks/${made.body.id}`, { state: "paused" })).status).toBe(200);
  const store = (entity: string, content: string) =>
    call(a.url, "POST", "/v1/memory", { namespace: "crm", entity, content, infer: false });
  expect((await store("bob", "bob likes coffee")).status).toBe(200);
  expect((await store("alice", "alice's phone is 555-0199")).status).toBe(200);
  // Resumed, the delivering replica reads both events at once and sends bob's; its answer waits.
  let release = () => {};
  receiver.hold = new Promise<void>((resolve) => {
    release = resolve;
  });
  expect((await call(a.url, "PATCH", `/v1/webhooks/${made.body.id}`, { state: "active" })).status).toBe(200);
  const deadline = Date.now() + 15_000;
  let holder = -1;
  while ((receiver.arrivals === 0 || holder < 0) && Date.now() < deadline) {
    await Bun.sleep(10);
    holder = replicas.findIndex(
      (p) => p.stdout().includes(`"webhook":"${made.body.id}"`) && p.stdout().includes("lease taken"),
    );
  }
  expect(receiver.arrivals).toBeGreaterThan(0);
  expect(holder).toBeGreaterThanOrEqual(0);
  const other = replicas[1 - holder];
  expect((await call(other.url, "POST", "/v1/memory/erase", { namespace: "crm", entity: "alice" })).status).toBe(200);
  receiver.hold = undefined;
  release();
  const events = await call(a.url, "GET", "/v1/memory/events?namespace=crm&limit=100");
  const seqs = (events.body as { id: string }[]).map((e) => Number(e.id)).sort((x, y) => x - y);
  await receiver.waitFor(seqs, 15_000);
  expect(checkDeliveries(receiver.accepted, seqs)).toEqual([]);
  expect(receiver.accepted[0].body.data.entity).toBe("bob");
  expect(JSON.stringify(receiver.accepted)).not.toContain("555-0199");
  const kinds = receiver.accepted.map((r) => [r.type, r.body.data.entity, r.body.data.reason]);
  expect(kinds).toContainEqual(["memory.add", "alice", "erased"]);
}, 60_000);
