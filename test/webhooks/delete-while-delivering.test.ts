// @targets postgres
// DELETE /v1/webhooks/{id} while the delivery thread writes the subscription's cursor and log: a
// delivery's write locks the subscription's row, then its log's row (webhook_logs). The
// delete used to take them the other way round, and the two deadlocked: PostgreSQL ended one, and
// the DELETE answered 503 storage_unavailable (seen in the bench right after a busy delivery).
// Here a transaction of the test takes the locks as a delivery's write does, with the DELETE
// waiting between its two steps, so the order is the same every run.
import { afterAll, expect, test } from "bun:test";
import { SQL } from "bun";
import { call as callAs } from "../binary-helpers";
import { backendArgs, rootSecret, type ServerProcess, spawnServer, tempDir } from "../helpers";
import { startReceiver } from "./receiver";

const tmp = tempDir();
const receiver = startReceiver();
let server: ServerProcess | undefined;
let db: SQL | undefined;
afterAll(async () => {
  server?.proc.kill("SIGKILL");
  await db?.close();
  await receiver.stop();
  tmp.cleanup();
});

const call = (method: string, path: string, body?: unknown) => callAs(server!.url, rootSecret, method, path, body);

test("a subscription deleted while a delivery writes its log is deleted, not answered 503", async () => {
  const args = await backendArgs(tmp.dir);
  const url = args[args.indexOf("--database-url") + 1];
  server = await spawnServer(["--data-dir", tmp.dir, ...args, "--webhook-allow-private"], {
    MEMD_API_KEY: rootSecret,
    MEMD_EMBEDDER: "none",
  });
  const made = await call("POST", "/v1/webhooks", { url: receiver.url, namespaces: "d" });
  expect(made.status).toBe(201);
  receiver.secret = made.body.secret;
  const id = made.body.id as string;
  for (let i = 0; i < 3; i++)
    expect(
      (await call("POST", "/v1/memory", { namespace: "d", entity: "e", content: `fact ${i}`, infer: false })).status,
    ).toBe(200);
  // Delivered, and the log written (the row the delete and the delivery's write both lock).
  for (const deadline = Date.now() + 20_000; ; await Bun.sleep(20)) {
    const log = await call("GET", `/v1/webhooks/${id}/deliveries`);
    if (log.body?.length >= 3) break;
    if (Date.now() > deadline) throw new Error(`no deliveries logged: ${JSON.stringify(log.body)}`);
  }
  db = new SQL({ url, max: 2 });
  let deleted: Promise<{ status: number; body: any }> | undefined;
  await db.begin(async (tx) => {
    // As a delivery's write: the subscription's row first...
    await tx`SELECT 1 FROM webhooks WHERE id = ${id} FOR UPDATE`;
    deleted = call("DELETE", `/v1/webhooks/${id}`);
    // ...the DELETE now waits for a lock (behind this transaction)...
    for (const deadline = Date.now() + 20_000; ; await Bun.sleep(20)) {
      const [w] = await db!`SELECT count(*)::int AS n FROM pg_stat_activity
          WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE 'DELETE FROM webhook%'`;
      if (w.n > 0) break;
      if (Date.now() > deadline) throw new Error("the DELETE never waited for the subscription's row");
    }
    // ...then the log's row, as the delivery's write does.
    await tx`SELECT 1 FROM webhook_logs WHERE webhook_id = ${id} FOR UPDATE`;
  });
  const answer = await deleted!;
  expect(answer).toEqual({ status: 200, body: { id, deleted: true } });
  expect((await call("GET", `/v1/webhooks/${id}`)).status).toBe(404);
  const [left] = await db`SELECT count(*)::int AS n FROM webhook_logs WHERE webhook_id = ${id}`;
  expect(left.n).toBe(0);
});
