// @targets lmdb postgres binary
// The TypeScript client's webhooks calls against a real server, and its verifyWebhook helper on a
// real delivery: it accepts what the official standardwebhooks library accepts, and refuses a
// changed body, a wrong secret and an old timestamp.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { Webhook } from "standardwebhooks";
import { createClient, MemdError, verifyWebhook, WebhookVerificationError } from "../../client/src/index";
import { rootSecret, startTestServer, type TestServer } from "../helpers";

let s: TestServer;
let raw: { body: string; headers: Record<string, string> }[] = [];
let receiver: ReturnType<typeof Bun.serve>;
beforeAll(async () => {
  s = await startTestServer({ args: ["--webhook-allow-private", "--webhook-retry-base-ms", "20"] });
  receiver = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch: async (req) => {
      raw.push({ body: await req.text(), headers: Object.fromEntries(req.headers) });
      return new Response("ok");
    },
  });
});
afterAll(async () => {
  receiver.stop(true);
  await s.stop();
});

test("create, list, get, update, deliveries, replay, rotate, delete; a delivery verifies", async () => {
  const memd = createClient({ url: s.url, key: rootSecret });
  const made = await memd.webhooks.create({ url: `http://127.0.0.1:${receiver.port}/`, namespaces: "client" });
  expect(made.secret).toMatch(/^whsec_/);
  expect((await memd.webhooks.list()).map((w) => w.id)).toContain(made.id);
  expect((await memd.webhooks.get(made.id)).state).toBe("active");
  expect((await memd.webhooks.update(made.id, { description: "from the client" })).description).toBe("from the client");
  raw = [];
  await memd.store({ namespace: "client", entity: "e", content: "hello webhooks", infer: false });
  const deadline = Date.now() + 15_000;
  while (raw.length === 0 && Date.now() < deadline) await Bun.sleep(10);
  const { body, headers } = raw[0];
  const payload = await verifyWebhook(made.secret, headers, body);
  expect(payload.type).toBe("memory.add");
  if (payload.type === "entity.erased") throw new Error("an event was expected");
  expect(payload.data.newContent).toBe("hello webhooks");
  expect(new Webhook(made.secret).verify(body, headers)).toEqual(payload);
  expect(await verifyWebhook(made.secret, new Headers(headers), body)).toEqual(payload);

  const refused = async (p: Promise<unknown>) => expect(p).rejects.toBeInstanceOf(WebhookVerificationError);
  await refused(verifyWebhook(made.secret, headers, body.replace("hello", "HELLO")));
  await refused(verifyWebhook(`whsec_${btoa("another secret of thirty-two bytes")}`, headers, body));
  await refused(verifyWebhook(made.secret, headers, body, { now: Date.now() + 10 * 60_000 }));
  await refused(verifyWebhook(made.secret, { ...headers, "webhook-id": "msg_other" }, body));

  // The attempt is logged with the cursor's move, just after the receiver's answer.
  let log = await memd.webhooks.deliveries(made.id, { limit: 5 });
  while (log.length === 0 && Date.now() < deadline) {
    await Bun.sleep(10);
    log = await memd.webhooks.deliveries(made.id, { limit: 5 });
  }
  expect(log[0]).toMatchObject({ ok: true, status: 200, seq: payload.data.seq });
  await memd.webhooks.replay(made.id, payload.data.seq);
  while (raw.length < 2 && Date.now() < deadline) await Bun.sleep(10);
  expect(raw[1].headers["webhook-id"]).toBe(headers["webhook-id"]);
  // An erasure: its DELETE (memory.erased), then the erasure itself (entity.erased), typed apart.
  await memd.erase({ namespace: "client", entity: "e" });
  const erasedAt = async () => {
    for (const r of raw) {
      const p = await verifyWebhook(made.secret, r.headers, r.body);
      if (p.type === "entity.erased") return p;
    }
  };
  let erasure = await erasedAt();
  while (!erasure && Date.now() < deadline) {
    await Bun.sleep(10);
    erasure = await erasedAt();
  }
  expect(erasure?.data).toMatchObject({ namespace: "client", entity: "e", memories: 1 });
  const rotated = await memd.webhooks.rotateSecret(made.id);
  expect(rotated.secret).not.toBe(made.secret);
  expect(await memd.webhooks.delete(made.id)).toEqual({ id: made.id, deleted: true });
  const gone = await memd.webhooks.get(made.id).catch((e) => e);
  expect(gone).toBeInstanceOf(MemdError);
  expect(gone.status).toBe(404);
});
