// @targets lmdb postgres binary
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Webhook } from "standardwebhooks";
import { startTestServer, type TestServer } from "../helpers";
import { checkDeliveries, type Receiver, startReceiver } from "./receiver";

/** Short retries and time limits, so that the faults below take milliseconds, not minutes. */
const fast = [
  "--webhook-allow-private",
  "--webhook-retry-base-ms",
  "20",
  "--webhook-retry-max-ms",
  "200",
  "--webhook-timeout-ms",
  "400",
  "--webhook-connect-timeout-ms",
  "400",
];

let s: TestServer;
const receivers: Receiver[] = [];
beforeAll(async () => {
  s = await startTestServer({ args: fast });
});
afterAll(async () => {
  await s.stop();
  for (const r of receivers) await r.stop();
});

function receiver() {
  const r = startReceiver();
  receivers.push(r);
  return r;
}

async function subscribe(r: Receiver, body: Record<string, unknown>, key?: string) {
  const res = await s.json("POST", "/v1/webhooks", { url: r.url, ...body }, key ? { key } : undefined);
  expect(res.status).toBe(201);
  r.secret = res.body.secret;
  return res.body as { id: string; secret: string; cursor: number };
}

async function store(namespace: string, content: string, entity = "e") {
  const res = await s.json("POST", "/v1/memory", { namespace, entity, content, infer: false });
  expect(res.status).toBe(200);
  return res.body.memories[0].id as string;
}

/** The seqs of a namespace's events (optionally of some kinds), oldest first. */
async function seqsOf(namespace: string, kinds?: string[]) {
  const res = await s.json("GET", `/v1/memory/events?namespace=${encodeURIComponent(namespace)}&limit=1000`);
  return (res.body as { id: string; event: string }[])
    .filter((e) => !kinds || kinds.includes(e.event))
    .map((e) => Number(e.id))
    .sort((a, b) => a - b);
}

async function webhook(id: string) {
  return (await s.json("GET", `/v1/webhooks/${id}`)).body;
}

/** Polls until `check` holds (at most 15 s). */
async function until(what: string, check: () => Promise<boolean> | boolean) {
  const deadline = Date.now() + 15_000;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await Bun.sleep(20);
  }
}

describe("subscriptions", () => {
  test("create shows the secret once; list, get, patch and delete never show it", async () => {
    const r = receiver();
    const made = await s.json("POST", "/v1/webhooks", {
      url: r.url,
      namespaces: "crm/*",
      events: ["ADD", "DELETE"],
      description: "crm sync",
    });
    expect(made.status).toBe(201);
    expect(made.body.secret).toMatch(/^whsec_[A-Za-z0-9+/=]{40,}$/);
    expect(made.body).toMatchObject({ namespaces: ["crm/*"], events: ["ADD", "DELETE"], state: "active" });
    const id = made.body.id;
    const listed = await s.json("GET", "/v1/webhooks");
    expect(listed.body.map((w: any) => w.id)).toContain(id);
    expect(JSON.stringify(listed.body)).not.toContain(made.body.secret);
    const got = await webhook(id);
    expect(got.secret).toBeUndefined();
    const patched = await s.json("PATCH", `/v1/webhooks/${id}`, { state: "paused", events: ["ADD"] });
    expect(patched.status).toBe(200);
    expect(patched.body).toMatchObject({ state: "paused", events: ["ADD"], stateReason: "paused through the API" });
    expect((await s.json("PATCH", `/v1/webhooks/${id}`, { paused: false })).body.state).toBe("active");
    expect((await s.json("DELETE", `/v1/webhooks/${id}`)).status).toBe(200);
    expect((await s.json("GET", `/v1/webhooks/${id}`)).status).toBe(404);
    expect((await s.json("DELETE", `/v1/webhooks/${id}`)).status).toBe(404);
  });

  const refusals: [string, Record<string, unknown>, number, string][] = [
    ["not a URL", { url: "not a url", namespaces: "a" }, 400, "url"],
    ["ftp URL", { url: "ftp://example.com/x", namespaces: "a" }, 400, "http"],
    ["bad pattern", { url: "http://127.0.0.1:9/x", namespaces: "a*b" }, 400, "namespaces[0]"],
    ["unknown kind", { url: "http://127.0.0.1:9/x", namespaces: "a", events: ["NOPE"] }, 400, "events"],
    ["no namespaces", { url: "http://127.0.0.1:9/x" }, 400, "namespaces"],
    [
      "an empty list of namespaces",
      { url: "http://127.0.0.1:9/x", namespaces: [] },
      400,
      "or a list of 1 to 64 strings",
    ],
    ["an empty list of kinds", { url: "http://127.0.0.1:9/x", namespaces: "a", events: [] }, 400, "a list of 1 to 7"],
    ["unknown field", { url: "http://127.0.0.1:9/x", namespaces: "a", secret: "x" }, 400, "secret"],
  ];
  for (const [name, body, status, fragment] of refusals)
    test(`refused: ${name}`, async () => {
      const res = await s.json("POST", "/v1/webhooks", body);
      expect(res.status).toBe(status);
      expect(JSON.stringify(res.body)).toContain(fragment);
    });

  test("a read key subscribes only to namespaces it covers, sees only its own, and pauses when revoked", async () => {
    const k = await s.json("POST", "/v1/keys", { name: "reader", permission: "read", namespaces: ["team/*"] });
    const key = k.body.secret;
    const r = receiver();
    const outside = await s.json("POST", "/v1/webhooks", { url: r.url, namespaces: "*" }, { key });
    expect(outside.status).toBe(403);
    const other = await s.json("POST", "/v1/webhooks", { url: r.url, namespaces: "other" }, { key });
    expect(other.status).toBe(403);
    const mine = await subscribe(r, { namespaces: "team/x" }, key);
    // An admin's subscription is not the reader's to see.
    const admins = await subscribe(receiver(), { namespaces: "team/x" });
    const seen = (await s.json("GET", "/v1/webhooks", undefined, { key })).body.map((w: any) => w.id);
    expect(seen).toContain(mine.id);
    expect(seen).not.toContain(admins.id);
    expect((await s.json("GET", `/v1/webhooks/${admins.id}`, undefined, { key })).status).toBe(404);

    await store("team/x", "before revoke");
    const first = await seqsOf("team/x");
    await r.waitFor(first);
    expect((await s.json("DELETE", `/v1/keys/${k.body.id}`)).status).toBe(200);
    await until("the subscription to pause", async () => (await webhook(mine.id)).state === "paused");
    const w = await webhook(mine.id);
    expect(w.stateReason).toContain("revoked");
    await store("team/x", "after revoke");
    await Bun.sleep(300);
    expect(r.accepted.map((a) => a.seq)).toEqual(first);
  });

  test("after a revocation is answered, nothing more is sent, also what is stored at once after it", async () => {
    const k = await s.json("POST", "/v1/keys", { name: "revoked-at-once", permission: "read", namespaces: ["gone/*"] });
    const r = receiver();
    const sub = await subscribe(r, { namespaces: "gone/x" }, k.body.secret);
    await store("gone/x", "before revoke");
    const first = await seqsOf("gone/x");
    await r.waitFor(first);
    expect((await s.json("DELETE", `/v1/keys/${k.body.id}`)).status).toBe(200);
    for (let i = 0; i < 5; i++) await store("gone/x", `after revoke ${i}`);
    await until("the subscription to pause", async () => (await webhook(sub.id)).state === "paused");
    expect((await webhook(sub.id)).stateReason).toContain("revoked");
    expect(r.accepted.map((a) => a.seq)).toEqual(first);
    expect(r.arrivals).toBe(1);
    // It cannot be resumed: it would pause again at once.
    const resumed = await s.json("PATCH", `/v1/webhooks/${sub.id}`, { state: "active" });
    expect(resumed.status).toBe(409);
    expect(resumed.body.error.message).toContain("was revoked");
    expect((await webhook(sub.id)).state).toBe("paused");
  });

  test("given namespaces its maker key does not cover, it pauses before sending any of theirs; resumed with ones it covers", async () => {
    const k = await s.json("POST", "/v1/keys", { name: "narrow", permission: "read", namespaces: ["mine/*"] });
    const r = receiver();
    const sub = await subscribe(r, { namespaces: "mine/x" }, k.body.secret);
    await store("mine/x", "the reader's");
    const first = await seqsOf("mine/x");
    await r.waitFor(first);
    // An admin (the root key) may give it any namespaces; the reader may not read "theirs".
    expect((await s.json("PATCH", `/v1/webhooks/${sub.id}`, { namespaces: "theirs" })).status).toBe(200);
    await store("theirs", "not the reader's");
    await until("the subscription to pause", async () => (await webhook(sub.id)).state === "paused");
    expect((await webhook(sub.id)).stateReason).toContain('no longer covers "theirs"');
    expect(r.accepted.map((a) => a.seq)).toEqual(first);
    expect(r.arrivals).toBe(1);
    // Resumed as it is: 409; resumed with namespaces the key covers (one PATCH): delivers again.
    expect((await s.json("PATCH", `/v1/webhooks/${sub.id}`, { state: "active" })).status).toBe(409);
    const back = await s.json("PATCH", `/v1/webhooks/${sub.id}`, { state: "active", namespaces: "mine/x" });
    expect(back.status).toBe(200);
    expect(back.body).toMatchObject({ state: "active", namespaces: ["mine/x"] });
    await store("mine/x", "again");
    const now = await seqsOf("mine/x");
    await r.waitFor(now);
    // (The first again too, with its webhook-id, when its cursor write was not made before the edit.)
    expect(checkDeliveries(r.accepted, now)).toEqual([]);
    expect(new Set(r.accepted.map((a) => a.seq))).toEqual(new Set(now));
  });

  test("a replay from past the end of the trail is refused, and the cursor stays", async () => {
    const sub = await subscribe(receiver(), { namespaces: "replay-end" });
    await store("replay-end", "one");
    // The newest event of the trail (the tests of this file run one after another).
    const lastSeq = Math.max(...(await seqsOf("replay-end")));
    // Delivered and its cursor written: the cursor stays there unless the replay moves it.
    await until("the cursor", async () => (await webhook(sub.id)).cursor === lastSeq);
    const res = await s.json("POST", `/v1/webhooks/${sub.id}/replay`, { fromSeq: lastSeq + 1000 });
    expect(res.status).toBe(400);
    expect(res.body.error.details[0].field).toBe("fromSeq");
    expect(res.body.error.message).toContain("past the end of the trail");
    expect((await webhook(sub.id)).cursor).toBe(lastSeq);
    expect((await s.json("POST", `/v1/webhooks/${sub.id}/replay`, { fromSeq: 0 })).status).toBe(400);
  });
});

describe("delivery", () => {
  test("every matching event, signed, once each, in trail order, from concurrent stores into two namespaces", async () => {
    const r = receiver();
    const sub = await subscribe(r, { namespaces: "shop/*" });
    await Promise.all(
      Array.from({ length: 8 }, async (_, w) => {
        for (let i = 0; i < 8; i++) await store(`shop/${w % 2}`, `writer ${w} fact ${i}`, `e${w}`);
      }),
    );
    await store("elsewhere", "not wanted");
    const expected = [...(await seqsOf("shop/0")), ...(await seqsOf("shop/1"))].sort((a, b) => a - b);
    expect(expected.length).toBe(64);
    await r.waitFor(expected);
    expect(checkDeliveries(r.accepted, expected)).toEqual([]);
    expect(r.accepted.length).toBe(64);
    const one = r.accepted[0];
    expect(one.id).toBe(`msg_${one.seq}_${sub.id}`);
    expect(one.type).toBe("memory.add");
    expect(one.body.data).toMatchObject({ id: String(one.seq), event: "ADD" });
    expect(one.body.data.newContent).toMatch(/^writer \d fact \d$/);
    // The cursor moved past the last one, durably readable.
    await until("the cursor", async () => (await webhook(sub.id)).cursor >= expected.at(-1)!);
  });

  test("only the kinds asked for", async () => {
    const r = receiver();
    await subscribe(r, { namespaces: "kinds", events: ["DELETE"] });
    const id = await store("kinds", "to be deleted");
    await store("kinds", "stays");
    expect((await s.json("DELETE", `/v1/memory/${id}`)).status).toBe(200);
    const deletes = await seqsOf("kinds", ["DELETE"]);
    await r.waitFor(deletes);
    await Bun.sleep(200);
    expect(r.accepted.map((a) => a.type)).toEqual(["memory.delete"]);
  });

  test("receiver down, then up: nothing lost, in order; the failures are in the delivery log", async () => {
    const r = receiver();
    const sub = await subscribe(r, { namespaces: "down" });
    await r.stop();
    for (let i = 0; i < 10; i++) await store("down", `fact ${i}`);
    const expected = await seqsOf("down");
    await until("a failed attempt", async () => (await webhook(sub.id)).failingSince !== null);
    const log = (await s.json("GET", `/v1/webhooks/${sub.id}/deliveries`)).body;
    expect(log[0]).toMatchObject({ ok: false, status: null, seq: expected[0] });
    expect(log[0].error).toContain("ECONNREFUSED");
    r.start();
    await r.waitFor(expected);
    expect(checkDeliveries(r.accepted, expected)).toEqual([]);
    await until("failure cleared", async () => (await webhook(sub.id)).failingSince === null);
  });

  test("500 then 200: retried with the same webhook-id, later events wait", async () => {
    const r = receiver();
    const sub = await subscribe(r, { namespaces: "flaky" });
    r.answer = { status: 500, delayMs: 0 };
    for (let i = 0; i < 5; i++) await store("flaky", `fact ${i}`);
    const expected = await seqsOf("flaky");
    await until("three failed attempts", () => r.arrivals >= 3);
    r.answer = { status: 200, delayMs: 0 };
    await r.waitFor(expected);
    expect(checkDeliveries(r.accepted, expected)).toEqual([]);
    const log = (await s.json("GET", `/v1/webhooks/${sub.id}/deliveries?limit=100`)).body as any[];
    const failed = log.filter((d) => !d.ok);
    expect(failed.length).toBeGreaterThanOrEqual(3);
    // Every failure was of the first event, with the first event's id: the others waited.
    for (const d of failed)
      expect(d).toMatchObject({ seq: expected[0], status: 500, messageId: `msg_${expected[0]}_${sub.id}` });
    expect(failed.map((d) => d.attempt).sort((a, b) => b - a)[0]).toBeGreaterThanOrEqual(3);
  });

  test("an answer slower than the time limit is a failure, retried until one comes in time", async () => {
    const r = receiver();
    const sub = await subscribe(r, { namespaces: "slow" });
    // Well past the limit: a delivery thread kept from running past 400 ms reads an answer that
    // came meanwhile before its timer (post.ts timeLimit), and that would be a success.
    r.answer = { status: 200, delayMs: 3000 };
    await store("slow", "one");
    const expected = await seqsOf("slow");
    await until("a timed-out attempt", async () =>
      ((await s.json("GET", `/v1/webhooks/${sub.id}/deliveries`)).body as any[]).some((d) =>
        String(d.error).includes("no answer within 400 ms"),
      ),
    );
    r.answer = { status: 200, delayMs: 0 };
    await r.waitFor(expected);
    // The slow answers may have been counted by the receiver too: repeats carry the same id.
    expect(checkDeliveries(r.accepted, expected)).toEqual([]);
  });

  test("a redirect is not followed", async () => {
    const target = receiver();
    const r = receiver();
    const sub = await subscribe(r, { namespaces: "redirect" });
    target.secret = r.secret;
    r.answer = { status: 302, delayMs: 0 };
    await store("redirect", "one");
    await until("a failed attempt", async () => (await webhook(sub.id)).lastError !== null);
    expect((await webhook(sub.id)).lastError).toContain("redirects are not followed");
    expect(target.arrivals).toBe(0);
    await s.json("DELETE", `/v1/webhooks/${sub.id}`);
  });

  test("pause holds events; resume delivers them; replay sends again with the same ids", async () => {
    const r = receiver();
    const sub = await subscribe(r, { namespaces: "pause" });
    await s.json("PATCH", `/v1/webhooks/${sub.id}`, { state: "paused" });
    for (let i = 0; i < 4; i++) await store("pause", `fact ${i}`);
    const expected = await seqsOf("pause");
    await Bun.sleep(300);
    expect(r.arrivals).toBe(0);
    await s.json("PATCH", `/v1/webhooks/${sub.id}`, { state: "active" });
    await r.waitFor(expected);
    const firstIds = r.accepted.map((a) => a.id);
    const replay = await s.json("POST", `/v1/webhooks/${sub.id}/replay`, { fromSeq: expected[1] });
    expect(replay.status).toBe(200);
    await until("the replay", () => r.accepted.length === 4 + 3);
    expect(r.accepted.slice(4).map((a) => a.id)).toEqual(firstIds.slice(1));
    expect(checkDeliveries(r.accepted, expected)).toEqual([]);
  });

  test("a replay while successes wait for their cursor write keeps the cursor it set", async () => {
    // Successes move the cursor in a write made up to a second later. A replay in between sets the
    // cursor back (a new rev); the successes planned before it must not move it forward again,
    // else a restart during the replay skips what the replay had still to send.
    const r = receiver();
    const sub = await subscribe(r, { namespaces: "replay-busy" });
    await s.json("PATCH", `/v1/webhooks/${sub.id}`, { state: "paused" });
    for (let i = 0; i < 40; i++) await store("replay-busy", `fact ${i}`);
    const expected = await seqsOf("replay-busy");
    r.answer = { status: 200, delayMs: 25 };
    await s.json("PATCH", `/v1/webhooks/${sub.id}`, { state: "active" });
    await until("the first deliveries", () => r.accepted.length >= 4);
    const replay = await s.json("POST", `/v1/webhooks/${sub.id}/replay`, { fromSeq: expected[0] });
    expect(replay.status).toBe(200);
    r.answer = { status: 500, delayMs: 0 };
    const delivered = new Set(r.accepted.map((a) => a.seq));
    // A failed attempt at an event delivered before: the replay is under way, and every success
    // before it was written (a failure is written after them).
    await until("a replayed event failing", async () => {
      const log = (await s.json("GET", `/v1/webhooks/${sub.id}/deliveries`)).body as { seq: number; ok: boolean }[];
      return log.some((d) => !d.ok && delivered.has(d.seq));
    });
    // At most as far as the replay itself got (an attempt may have been answered 200 before the 500s).
    const seen = new Set<number>();
    let resent = expected[0] - 1;
    for (const a of r.accepted) {
      if (seen.has(a.seq)) resent = Math.max(resent, a.seq);
      seen.add(a.seq);
    }
    expect((await webhook(sub.id)).cursor).toBeLessThanOrEqual(resent);
    r.answer = { status: 200, delayMs: 0 };
    await until("the replay's end", async () => (await webhook(sub.id)).cursor >= expected[expected.length - 1]);
    expect(checkDeliveries(r.accepted, expected)).toEqual([]);
  });

  test("a rotated secret signs beside the old one for 24 hours", async () => {
    const r = receiver();
    const sub = await subscribe(r, { namespaces: "rotate" });
    const old = sub.secret;
    const rotated = await s.json("POST", `/v1/webhooks/${sub.id}/rotate-secret`);
    expect(rotated.status).toBe(200);
    expect(rotated.body.secret).toMatch(/^whsec_/);
    expect(rotated.body.secret).not.toBe(old);
    const until24h = Date.parse(rotated.body.previousSecretUntil) - Date.now();
    expect(until24h).toBeGreaterThan(23.9 * 3600_000);
    r.secret = rotated.body.secret;
    await store("rotate", "signed twice");
    const expected = await seqsOf("rotate");
    await r.waitFor(expected);
    expect(r.accepted[0].verified).toBe(true);
    // The old secret verifies the same delivery (the signature header carries both).
    const { body, id } = r.accepted[0];
    const text = JSON.stringify(body);
    const headers = (await import("../../src/webhooks/signing")).signedHeaders([rotated.body.secret, old], id, text);
    expect(() => new Webhook(old).verify(text, headers)).not.toThrow();
  });

  test("an erasure scrubs what is not yet delivered, and is delivered itself", async () => {
    const r = receiver();
    const sub = await subscribe(r, { namespaces: "erase" });
    await s.json("PATCH", `/v1/webhooks/${sub.id}`, { state: "paused" });
    await store("erase", "alice's phone is 555-0100", "alice");
    await store("erase", "bob likes tea", "bob");
    const erased = await s.json("POST", "/v1/memory/erase", { namespace: "erase", entity: "alice" });
    expect(erased.status).toBe(200);
    await s.json("PATCH", `/v1/webhooks/${sub.id}`, { state: "active" });
    const expected = await seqsOf("erase");
    await r.waitFor(expected);
    expect(checkDeliveries(r.accepted, expected)).toEqual([]);
    expect(JSON.stringify(r.accepted)).not.toContain("555-0100");
    const kinds = r.accepted.map((a) => [a.type, a.body.data.entity, a.body.data.reason]);
    expect(kinds).toContainEqual(["memory.erased", "alice", "erased"]);
    // alice's ADD, not delivered before the erasure, comes without its content.
    expect(kinds).toContainEqual(["memory.add", "alice", "erased"]);
    expect(JSON.stringify(r.accepted)).toContain("bob likes tea");
    // The erasure itself, after its DELETE.
    await until("the erasure", () => r.accepted.some((a) => a.type === "entity.erased"));
    const erasure = r.accepted.find((a) => a.type === "entity.erased")!;
    expect(erasure.body.data).toMatchObject({ namespace: "erase", entity: "alice", memories: 1 });
    const del = r.accepted.find((a) => a.type === "memory.erased")!;
    expect(erasure.seq).toBeGreaterThan(del.seq);
    expect(checkDeliveries(r.accepted, [...expected, erasure.seq])).toEqual([]);
  });

  test("an erasure made while a POST is in flight scrubs the events read with it", async () => {
    const r = receiver();
    const sub = await subscribe(r, { namespaces: "erase-flight" });
    await s.json("PATCH", `/v1/webhooks/${sub.id}`, { state: "paused" });
    await store("erase-flight", "bob likes coffee", "bob");
    await store("erase-flight", "alice's phone is 555-0199", "alice");
    // Resumed, the subscription reads both events at once and sends bob's; its answer waits until
    // alice is erased, so her event, read before the erasure, is sent after it.
    let release = () => {};
    r.hold = new Promise<void>((resolve) => {
      release = resolve;
    });
    await s.json("PATCH", `/v1/webhooks/${sub.id}`, { state: "active" });
    await until("the first POST", () => r.arrivals > 0);
    expect((await s.json("POST", "/v1/memory/erase", { namespace: "erase-flight", entity: "alice" })).status).toBe(200);
    r.hold = undefined;
    release();
    const expected = await seqsOf("erase-flight");
    await r.waitFor(expected);
    expect(checkDeliveries(r.accepted, expected)).toEqual([]);
    expect(r.accepted[0].body.data.entity).toBe("bob");
    expect(JSON.stringify(r.accepted)).not.toContain("555-0199");
    const kinds = r.accepted.map((a) => [a.type, a.body.data.entity, a.body.data.reason]);
    expect(kinds).toContainEqual(["memory.add", "alice", "erased"]);
  });

  test("an erasure of an entity with no current memory left is delivered too, in order, whatever the kinds", async () => {
    const r = receiver();
    const sub = await subscribe(r, { namespaces: "erase-gone/*", events: ["ADD"] });
    const id = await store("erase-gone/a", "carol's address is 12 Elm St", "carol");
    expect((await s.json("DELETE", `/v1/memory/${id}`)).status).toBe(200);
    const erased = await s.json("POST", "/v1/memory/erase", { namespace: "erase-gone/a", entity: "carol" });
    expect(erased.status).toBe(200);
    expect(erased.body.memories).toBe(1);
    await store("erase-gone/a", "dave likes tea", "dave");
    const adds = await seqsOf("erase-gone/a", ["ADD"]);
    expect(adds.length).toBe(2);
    await r.waitFor(adds);
    await until("the erasure", () => r.accepted.some((a) => a.type === "entity.erased"));
    const erasure = r.accepted.find((a) => a.type === "entity.erased")!;
    expect(erasure.verified).toBe(true);
    expect(erasure.id).toBe(`msg_${erasure.seq}_${sub.id}`);
    expect(erasure.body.data).toMatchObject({
      namespace: "erase-gone/a",
      entity: "carol",
      memories: 1,
      seq: erasure.seq,
    });
    // Between carol's DELETE (not wanted: kinds ADD) and dave's ADD, which came after.
    const [deleteSeq] = await seqsOf("erase-gone/a", ["DELETE"]);
    expect(erasure.seq).toBeGreaterThan(deleteSeq);
    expect(erasure.seq).toBeLessThan(adds[1]);
    expect(checkDeliveries(r.accepted, [...adds, erasure.seq])).toEqual([]);
    expect(r.accepted.map((a) => a.type)).toEqual(["memory.add", "entity.erased", "memory.add"]);
    // The deliveries log names it.
    await until("the erasure in the log", async () =>
      ((await s.json("GET", `/v1/webhooks/${sub.id}/deliveries`)).body as { event: string }[]).some(
        (d) => d.event === "ERASURE",
      ),
    );
  });

  test("a subscription failing longer than the limit is disabled and says why", async () => {
    const t = await startTestServer({ args: [...fast, "--webhook-disable-after-ms", "300"] });
    try {
      const r = receiver();
      r.answer = { status: 503, delayMs: 0 };
      const made = await t.json("POST", "/v1/webhooks", { url: r.url, namespaces: "dis" });
      await t.json("POST", "/v1/memory", { namespace: "dis", entity: "e", content: "x", infer: false });
      const deadline = Date.now() + 15_000;
      let w: any;
      do {
        await Bun.sleep(50);
        w = (await t.json("GET", `/v1/webhooks/${made.body.id}`)).body;
      } while (w.state !== "disabled" && Date.now() < deadline);
      expect(w.state).toBe("disabled");
      expect(w.stateReason).toContain("answered 503");
      expect(w.stateReason).toContain("(more than 0.3 s)");
      // Resuming starts afresh.
      r.answer = { status: 200, delayMs: 0 };
      r.secret = made.body.secret;
      await t.json("PATCH", `/v1/webhooks/${made.body.id}`, { state: "active" });
      await until("delivery after resume", () => r.accepted.length === 1);
    } finally {
      await t.stop();
    }
  });

  test("a retry waits its delay: stores elsewhere and other subscriptions' edits do not bring it forward", async () => {
    // The first retry comes 30 to 60 s after the failure: any attempt seen below came early.
    const t = await startTestServer({ args: ["--webhook-allow-private", "--webhook-retry-base-ms", "60000"] });
    try {
      const r = receiver();
      r.answer = { status: 500, delayMs: 0 };
      const made = await t.json("POST", "/v1/webhooks", { url: r.url, namespaces: "held" });
      await t.json("POST", "/v1/memory", { namespace: "held", entity: "e", content: "x", infer: false });
      await until(
        "the first attempt",
        async () => (await t.json("GET", `/v1/webhooks/${made.body.id}`)).body.lastError !== null,
      );
      for (let i = 0; i < 10; i++)
        await t.json("POST", "/v1/memory", { namespace: "elsewhere", entity: "e", content: `y ${i}`, infer: false });
      const other = await t.json("POST", "/v1/webhooks", { url: r.url, namespaces: "nobody" });
      await t.json("PATCH", `/v1/webhooks/${other.body.id}`, { description: "an edit" });
      await Bun.sleep(300);
      expect(r.arrivals).toBe(1);
    } finally {
      await t.stop();
    }
  });

  test("/metrics has delivered, failed and lag per subscription", async () => {
    const r = receiver();
    const sub = await subscribe(r, { namespaces: "metrics" });
    await store("metrics", "one");
    const [seq] = await seqsOf("metrics");
    await r.waitFor([seq]);
    // The count moves once the cursor has, just after the receiver's answer.
    await until("the cursor", async () => (await webhook(sub.id)).cursor >= seq);
    const text = await (await s.api("GET", "/metrics")).text();
    expect(text).toContain(`memd_webhook_delivered_total{webhook="${sub.id}"} 1`);
    expect(text).toContain(`memd_webhook_failed_total{webhook="${sub.id}"}`);
    expect(text).toContain(`memd_webhook_lag_events{webhook="${sub.id}"} 0`);
    expect(text).toContain(`memd_webhook_lag_seconds{webhook="${sub.id}"} 0`);
  });
});

test("OpenAPI documents every webhook route, with its body, its answer and its error answer", async () => {
  const { body: doc } = await s.json("GET", "/v1/openapi.json", undefined, { key: null });
  const routes: [string, string, string][] = [
    ["/v1/webhooks", "post", "201"],
    ["/v1/webhooks", "get", "200"],
    ["/v1/webhooks/{id}", "get", "200"],
    ["/v1/webhooks/{id}", "patch", "200"],
    ["/v1/webhooks/{id}", "delete", "200"],
    ["/v1/webhooks/{id}/rotate-secret", "post", "200"],
    ["/v1/webhooks/{id}/deliveries", "get", "200"],
    ["/v1/webhooks/{id}/replay", "post", "200"],
  ];
  for (const [path, method, ok] of routes) {
    const op = doc.paths[path]?.[method];
    expect([path, method, Object.keys(op?.responses ?? {}).sort()]).toEqual([path, method, [ok, "default"]]);
    expect(op.responses.default.content["application/json"].schema.properties.error).toBeDefined();
  }
  const create = doc.paths["/v1/webhooks"].post.requestBody.content["application/json"].schema;
  expect(create.required).toEqual(["url", "namespaces"]);
  expect(create.additionalProperties).toBe(false);
  expect(doc.paths["/v1/webhooks/{id}/replay"].post.requestBody.content["application/json"].schema.required).toEqual([
    "fromSeq",
  ]);
});

describe("private addresses", () => {
  let strict: TestServer;
  beforeAll(async () => {
    strict = await startTestServer();
  });
  afterAll(() => strict.stop());

  for (const url of [
    "http://127.0.0.1:8080/hook",
    "http://localhost/hook",
    "http://10.1.2.3/hook",
    "http://169.254.169.254/latest/meta-data",
    "http://[::1]/hook",
    "http://[::ffff:127.0.0.1]/hook",
    "https://192.168.0.10/hook",
  ])
    test(`refused without --webhook-allow-private: ${url}`, async () => {
      const res = await strict.json("POST", "/v1/webhooks", { url, namespaces: "a" });
      expect(res.status).toBe(400);
      expect(res.body.error.message).toContain("--webhook-allow-private");
    });
});
