// The storage contract: what every backend promises behind the Storage interface
// (src/storage/storage.ts), written once and run on every backend of ./backends.ts: LMDB, and
// PostgreSQL (always, in make test). A case is a function of a store, named after the role it
// covers; the loop at the bottom makes one test per case and backend, so a new case cannot forget
// a backend, and a test checks that every role of Storage has cases.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { ExportRecord, KeyRecord, WebhookRecord } from "../../src/storage/records";
import {
  IdempotencyKeyTaken,
  type IdempotencyRecord,
  type MemoryOp,
  type NewMemory,
  type Storage,
} from "../../src/storage/storage";
import { fieldOrder, lineCheckers } from "../../src/transfer/model";
import { type Backend, backends } from "./backends";

let unique = 0;
/** A namespace no other case uses. */
const ns = (what: string) => `${what}-${process.pid}-${++unique}`;

const newMemory = (namespace: string, content: string, extra: Partial<NewMemory> = {}): NewMemory => ({
  id: Bun.randomUUIDv7(),
  namespace,
  entity: "e",
  content,
  category: "general",
  importance: 0.5,
  ...extra,
});
const add = (namespace: string, content: string, extra: Partial<NewMemory> = {}): MemoryOp => ({
  event: "ADD",
  create: newMemory(namespace, content, extra),
});
const idOf = (op: MemoryOp) => (op as { create: NewMemory }).create.id;

const key = (name: string, extra: Partial<KeyRecord> = {}): KeyRecord => ({
  id: `key_${Bun.randomUUIDv7().replaceAll("-", "").slice(-16)}`,
  name,
  permission: "read",
  namespaces: ["*"],
  expiresAt: null,
  createdAt: Date.now(),
  lastUsedAt: null,
  revokedAt: null,
  hash: new Bun.CryptoHasher("sha256").update(`${name}-${Math.random()}`).digest("hex"),
  ...extra,
});

const webhook = (id: string, extra: Partial<WebhookRecord> = {}): WebhookRecord => ({
  id,
  url: "https://example.com/hook",
  namespaces: ["a/*"],
  events: [],
  description: null,
  secret: "whsec_x",
  previousSecret: null,
  previousSecretUntil: null,
  createdBy: "k",
  createdAt: 1,
  updatedAt: 1,
  state: "active",
  stateReason: null,
  cursor: 0,
  rev: 0,
  failingSince: null,
  lastDeliveredAt: null,
  lastError: null,
  ...extra,
});

async function all<T>(it: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const x of it) out.push(x);
  return out;
}

type Case = (s: Storage, backend: Backend) => Promise<void>;

const cases: Record<string, Case> = {
  "MemoryWrites: apply: of calls made at once, one whose op is bad fails alone and writes nothing; the others land whole":
    async (s) => {
      const n = ns("batch");
      const first = add(n, "green tea");
      const second = add(n, "green tea again");
      const results = await Promise.allSettled([
        s.apply([first, add(n, "with a sibling")], "k"),
        s.apply([add(n, "never written"), { event: "BOGUS" } as never], "k"),
        s.apply([second], "k"),
      ]);
      expect(results.map((r) => r.status)).toEqual(["fulfilled", "rejected", "fulfilled"]);
      // Calls made at once may commit in any order (LMDB batches them in arrival order, see
      // lmdb-write-plans.test.ts); a call made after an answer sees what was answered.
      await s.apply([{ event: "UPDATE", target: idOf(first), patch: { content: "black coffee" } }], "k");
      expect((await s.getMemory(idOf(first)))?.content).toBe("black coffee");
      const hits = async (term: string) =>
        (await s.keywordSearch({ namespace: n }, [{ term, weight: 1 }], {}, 10)).map((h) => h.memory.id);
      expect(await hits("coffee")).toEqual([idOf(first)]);
      expect(await hits("green")).toEqual([idOf(second)]);
      expect(await hits("never")).toEqual([]);
      const events = await s.newestEvents({ namespace: n }, 10);
      expect(events.map((e) => e.event).sort()).toEqual(["ADD", "ADD", "ADD", "UPDATE"]);
      expect((await s.currentMemories({ namespace: n }, 10)).map((m) => m.content).sort()).toEqual([
        "black coffee",
        "green tea again",
        "with a sibling",
      ]);
    },

  "MemoryWrites: apply: an op on a memory that is no longer current is skipped (null) and records nothing": async (
    s,
  ) => {
    const n = ns("skip");
    const a = add(n, "lives in Lisbon");
    await s.apply([a], "k");
    await s.apply([{ event: "DELETE", target: idOf(a), reason: "deleted" }], "k");
    const late = await s.apply([{ event: "UPDATE", target: idOf(a), patch: { content: "lives in Porto" } }], "k");
    expect(late).toEqual([null]);
    const record = await s.getMemory(idOf(a));
    expect([record?.state, record?.content]).toEqual(["deleted", "lives in Lisbon"]);
    expect(await s.currentMemories({ namespace: n }, 10)).toEqual([]);
    const events = await s.newestEvents({ namespace: n }, 10);
    expect(events.map((e) => [e.event, e.oldContent])).toEqual([
      ["DELETE", "lives in Lisbon"],
      ["ADD", null],
    ]);
  },

  "MemoryWrites: apply: an op on a memory created earlier in the same call acts on it; one on a memory created later is skipped":
    async (s) => {
      const n = ns("same-call");
      const a = add(n, "likes green tea");
      const b = add(n, "lives in Lisbon");
      const c = add(n, "lives in Porto");
      const late = add(n, "added after its update");
      const kept = add(n, "already stored");
      await s.apply([kept], "k");
      const applied = await s.apply(
        [
          a,
          b,
          { event: "UPDATE", target: idOf(late), patch: { content: "never" } }, // created later: skipped
          { event: "MERGE", target: idOf(a), patch: { content: "likes green tea and black coffee" }, reason: "merged" },
          { event: "REPLACE", target: idOf(b), create: (c as { create: NewMemory }).create, reason: "moved" },
          { event: "UPDATE", target: idOf(b), patch: { content: "never either" } }, // replaced just now: skipped
          { event: "KEEP_EXISTING", target: idOf(a), newContent: "likes tea" },
          { event: "UPDATE", target: idOf(kept), patch: { content: "stored, then updated" } },
          { event: "DELETE", target: idOf(c), reason: "deleted" },
          late,
        ],
        "k",
      );
      expect(applied.map((r) => r?.event.event ?? null)).toEqual([
        "ADD",
        "ADD",
        null,
        "MERGE",
        "REPLACE",
        null,
        "KEEP_EXISTING",
        "UPDATE",
        "DELETE",
        "ADD",
      ]);
      const current = await s.currentMemories({ namespace: n }, 10);
      expect(current.map((m) => m.content).sort()).toEqual([
        "added after its update",
        "likes green tea and black coffee",
        "stored, then updated",
      ]);
      expect((await s.getMemory(idOf(b)))?.state).toBe("replaced");
      expect((await s.getMemory(idOf(c)))?.state).toBe("deleted");
      const events = (await s.eventsAfter({ namespace: n }, 0, 100)).map((e) => [e.event, e.memoryId]);
      expect(events).toEqual([
        ["ADD", idOf(kept)],
        ["ADD", idOf(a)],
        ["ADD", idOf(b)],
        ["MERGE", idOf(a)],
        ["REPLACE", idOf(c)],
        ["KEEP_EXISTING", idOf(a)],
        ["UPDATE", idOf(kept)],
        ["DELETE", idOf(c)],
        ["ADD", idOf(late)],
      ]);
      // The search index follows the end state.
      const hits = async (term: string) =>
        (await s.keywordSearch({ namespace: n }, [{ term, weight: 1 }], {}, 10)).map((h) => h.memory.id);
      expect(await hits("black")).toEqual([idOf(a)]);
      expect(await hits("lisbon")).toEqual([]);
      expect(await hits("porto")).toEqual([]);
    },

  "EventReads: event times are unique and increasing per namespace: paging a burst by time loses and repeats nothing":
    async (s) => {
      const n = ns("clock");
      const now = Date.now();
      await Promise.all(Array.from({ length: 60 }, (_, i) => s.apply([add(n, `fact ${i}`)], "k", now)));
      const seen: number[] = [];
      let after = -1;
      for (let page = 0; page < 100; page++) {
        const events = await s.eventsAfter({ namespace: n }, after, 7);
        if (events.length === 0) break;
        for (const e of events) {
          expect(e.atMs).toBeGreaterThan(after);
          after = e.atMs;
          seen.push(e.seq);
        }
      }
      expect(seen.length).toBe(60);
      expect(new Set(seen).size).toBe(60);
    },

  "MemoryReads: listMemories pages newest first, and paging while memories go never loses or repeats one that stays":
    async (s) => {
      const n = ns("list");
      const ops = Array.from({ length: 9 }, (_, i) => add(n, `memory ${i}`, { tags: i % 2 ? ["odd"] : ["even"] }));
      for (const op of ops) await s.apply([op], "k");
      const first = await s.listMemories({ namespace: n, limit: 4 });
      expect(first.memories.map((m) => m.content)).toEqual(["memory 8", "memory 7", "memory 6", "memory 5"]);
      await s.apply([{ event: "DELETE", target: idOf(ops[8]), reason: "deleted" }], "k");
      await s.apply([{ event: "DELETE", target: idOf(ops[2]), reason: "deleted" }], "k");
      const rest: string[] = [];
      let before = first.next;
      while (before) {
        const page = await s.listMemories({ namespace: n, limit: 4, before });
        rest.push(...page.memories.map((m) => m.content));
        before = page.next;
      }
      expect(rest).toEqual(["memory 4", "memory 3", "memory 1", "memory 0"]);
      const odd = await s.listMemories({ namespace: n, tags: ["odd"], limit: 10 });
      expect(odd.memories.map((m) => m.content)).toEqual(["memory 7", "memory 5", "memory 3", "memory 1"]);
    },

  "Browse: namespaces and entities: name order, a page after a name, counts of current memories": async (s) => {
    const p = ns("browse");
    for (const [namespace, entity] of [
      [`${p}/b`, "x"],
      [`${p}/a`, "y"],
      [`${p}/a`, "x"],
      [`${p}/c`, "z"],
    ])
      await s.apply([{ event: "ADD", create: { ...newMemory(namespace, "c"), entity } }], "k");
    const names = await s.namespaces({ prefix: `${p}/`, limit: 10 });
    expect(names.map((x) => [x.namespace, x.memories])).toEqual([
      [`${p}/a`, 2],
      [`${p}/b`, 1],
      [`${p}/c`, 1],
    ]);
    expect((await s.namespaces({ prefix: `${p}/`, after: `${p}/a`, limit: 1 })).map((x) => x.namespace)).toEqual([
      `${p}/b`,
    ]);
    expect((await s.entities(`${p}/a`, { limit: 10 })).map((e) => [e.entity, e.memories])).toEqual([
      ["x", 1],
      ["y", 1],
    ]);
  },

  "MemoryReads: TTL: dueExpiries lists what expired, soonest first; a DELETE made for that expiry retires it once":
    async (s) => {
      const n = ns("ttl");
      const now = Date.now();
      const a = add(n, "expires first", { ttlSeconds: 1 });
      const b = add(n, "expires second", { ttlSeconds: 2 });
      await s.apply([a, b, add(n, "stays")], "k", now);
      const due = (await s.dueExpiries(now + 5000, 100)).filter((d) => [idOf(a), idOf(b)].includes(d.id));
      expect(due.map((d) => d.id)).toEqual([idOf(a), idOf(b)]);
      const expire = () =>
        s.apply([{ event: "DELETE", target: due[0].id, reason: "expired", expiresAt: due[0].expiresAt }], null);
      expect((await expire())[0]?.event.reason).toBe("expired");
      expect(await expire()).toEqual([null]);
    },

  "KeyStore: keys: one first key when none exists, found by hash; a revoked key keeps its record": async (s) => {
    const first = key("first");
    expect(await s.insertKey(first, { onlyIfNone: true })).toBe(true);
    expect(await s.insertKey(key("second"), { onlyIfNone: true })).toBe(false);
    expect((await s.keyByHash(first.hash))?.id).toBe(first.id);
    const other = key("other", { permission: "admin", namespaces: ["team/*"] });
    expect(await s.insertKey(other)).toBe(true);
    expect(await s.revokeKey(other.id, 1234)).toBe(true);
    expect(await s.revokeKey(other.id, 5678)).toBe(false);
    expect(await s.getKey(other.id)).toEqual({ ...other, revokedAt: 1234 });
    expect((await s.listKeys()).map((k) => k.name).sort()).toEqual(["first", "other"]);
  },

  "Idempotency: idempotency: an answer is kept with its change; a second change under the key writes nothing; entries expire":
    async (s) => {
      const n = ns("idem");
      const now = Date.now();
      const record = (keyId: string, key: string, hash: string): IdempotencyRecord => ({
        keyId,
        key,
        hash,
        expiresAt: now + 1000,
        answer: (applied) => ({ status: 200, body: JSON.stringify({ id: applied[0]?.memory.id }) }),
      });
      const first = add(n, "ordered a bike");
      await s.apply([first], "k1", now, record("k1", "order-1", "h1"));
      const kept = await s.idempotentAnswer("k1", "order-1", now);
      expect([kept?.hash, kept?.status, kept?.body]).toEqual(["h1", 200, JSON.stringify({ id: idOf(first) })]);
      await expect(
        s.apply([add(n, "ordered a second bike")], "k1", now, record("k1", "order-1", "h1")),
      ).rejects.toThrow(IdempotencyKeyTaken);
      expect((await s.currentMemories({ namespace: n }, 10)).map((m) => m.content)).toEqual(["ordered a bike"]);
      // Another API key has its own Idempotency-Keys; an answer of undefined keeps nothing.
      await s.apply([add(n, "by another key")], "k2", now, record("k2", "order-1", "h9"));
      expect((await s.idempotentAnswer("k2", "order-1", now))?.hash).toBe("h9");
      await s.apply([], "k3", now, { ...record("k3", "order-1", "h1"), answer: () => undefined });
      expect(await s.idempotentAnswer("k3", "order-1", now)).toBeUndefined();
      expect(await s.idempotentAnswer("k1", "order-1", now + 1000)).toBeUndefined();
      expect(await s.sweepIdempotency(now + 1000, 100)).toBeGreaterThanOrEqual(2);
      await s.apply([add(n, "a new order")], "k1", now + 2000, {
        ...record("k1", "order-1", "h2"),
        expiresAt: now + 3000,
      });
      expect((await s.idempotentAnswer("k1", "order-1", now + 2000))?.hash).toBe("h2");
    },

  "Erasure: erase: the entity's memories and events lose their content, other entities keep theirs, the erasure stays":
    async (s) => {
      const n = ns("erase");
      const a = add(n, "secret one", { tags: ["t"], metadata: { m: 1 }, source: "chat" });
      const kept = { ...add(n, "not theirs"), create: { ...newMemory(n, "not theirs"), entity: "other" } } as MemoryOp;
      await s.apply([a, kept], "k");
      await s.apply([{ event: "UPDATE", target: idOf(a), patch: { content: "secret two" } }], "k");
      const erasure = await s.erase(n, "e", "admin");
      expect([erasure.memories, erasure.events]).toEqual([1, 3]);
      const record = await s.getMemory(idOf(a));
      expect([record?.state, record?.content, record?.tags, record?.metadata, record?.source]).toEqual([
        "deleted",
        "",
        undefined,
        undefined,
        undefined,
      ]);
      const events = await s.newestEvents({ namespace: n, entity: "e" }, 10);
      expect(events.map((e) => [e.event, e.oldContent, e.newContent, e.reason])).toEqual([
        ["DELETE", null, null, "erased"],
        ["UPDATE", null, null, "erased"],
        ["ADD", null, null, "erased"],
      ]);
      expect((await s.getMemory(idOf(kept)))?.content).toBe("not theirs");
      expect((await s.erasures(n)).map((e) => [e.entity, e.actorKeyId])).toEqual([["e", "admin"]]);
    },

  "Transfer: export, then import into an empty store of the same backend: the same records, and existing() knows them":
    async (s, backend) => {
      const n = ns("transfer");
      const a = add(n, "moves along", { tags: ["x"], metadata: { deep: { list: [1, "two"] } } });
      await s.apply([a, add(n, "and another")], "k");
      await s.apply([{ event: "DELETE", target: idOf(a), reason: "deleted" }], "k");
      const exported = await all(s.exportAll({ namespaces: [n], keys: false }));
      expect(exported.map((r) => r.type)).toEqual(["memory", "memory", "event", "event", "event"]);
      const target = await backend.open();
      try {
        expect(await target.storage.existing(exported)).toEqual(exported.map(() => "absent"));
        await target.storage.importRecords(exported, { skipExisting: false, skipIdentical: false });
        const again: ExportRecord[] = await all(target.storage.exportAll({ namespaces: [n], keys: false }));
        expect(again).toEqual(exported);
        expect(await target.storage.existing(exported)).toEqual(exported.map(() => "identical"));
        await expect(
          target.storage.importRecords(exported, { skipExisting: false, skipIdentical: false }),
        ).rejects.toThrow();
      } finally {
        await target.close();
      }
    },

  "Transfer: a record with every field set has exactly the fields of the export format's line": async (s) => {
    // The record's shape is said in storage/records.ts, each backend's rows and the export format
    // (transfer/model.ts): a field one of them lacks shows here, on every backend.
    const a = add(ns("shape"), "every field", {
      tags: ["t"],
      metadata: { k: 1 },
      source: "chat",
      ttlSeconds: 3600,
      observedAt: Date.now() - 1000,
      key: "shape",
    });
    await s.apply([a], "k");
    await s.apply([{ event: "UPDATE", target: idOf(a), patch: { content: "every field, edited" } }], "k");
    const record = (await s.getMemory(idOf(a)))!;
    expect(Object.keys(record).sort()).toEqual(fieldOrder.memory.filter((f) => f !== "type").sort());
    expect(lineCheckers.memory.Check({ type: "memory", ...record })).toBe(true);
    const [event] = await s.newestEvents({ namespace: record.namespace }, 1);
    const eventFields = Object.keys(event).filter(
      (f) => (event as unknown as Record<string, unknown>)[f] !== undefined,
    );
    expect(fieldOrder.event.filter((f) => f !== "type")).toEqual(expect.arrayContaining(eventFields));
  },

  "Search: equal scores come newer first; category and tag filters keep only what matches": async (s) => {
    const n = ns("search");
    const older = add(n, "drinks green tea", { tags: ["drinks"] });
    const newer = add(n, "drinks green tea", { category: "habit" });
    await s.apply([older], "k");
    await s.apply([newer], "k");
    const hits = (filter: Parameters<Storage["keywordSearch"]>[2]) =>
      s
        .keywordSearch({ namespace: n }, [{ term: "tea", weight: 1 }], filter, 10)
        .then((r) => r.map((h) => h.memory.id));
    expect(await hits({})).toEqual([idOf(newer), idOf(older)]);
    expect(await hits({ tags: ["drinks"] })).toEqual([idOf(older)]);
    expect(await hits({ category: "habit" })).toEqual([idOf(newer)]);
  },

  "Embeddings: a pending memory gets its vector once, not after a change; semantic search finds it": async (s) => {
    const n = ns("vectors");
    const a = add(n, "likes cats", { vector: "pending" });
    const b = add(n, "likes dogs", { vector: [0, 1, 0] });
    await s.apply([a, b], "k");
    const mine = async () => (await s.pendingEmbeddings(1000)).filter((p) => p.id === idOf(a));
    const [pending] = await mine();
    expect(pending.content).toBe("likes cats");
    expect(await s.setVectors([{ id: idOf(a), updatedAt: pending.updatedAt - 1, vector: [1, 0, 0] }])).toBe(0);
    expect(await s.setVectors([{ id: idOf(a), updatedAt: pending.updatedAt, vector: [1, 0, 0] }])).toBe(1);
    expect(await mine()).toEqual([]);
    const near = await s.semanticSearch({ namespace: n }, new Float32Array([0.9, 0.1, 0]), {}, 10);
    expect(near.map((h) => h.memory.id)).toEqual([idOf(a), idOf(b)]);
  },

  "AsOfReads: a memory and its entity read as they were at a moment before a change": async (s) => {
    const n = ns("asof");
    const t0 = Date.now() - 60_000;
    const a = add(n, "lives in Lisbon");
    await s.apply([a], "k", t0);
    await s.apply([{ event: "UPDATE", target: idOf(a), patch: { content: "lives in Porto" } }], "k", t0 + 20_000);
    expect((await s.memoryAsOf(idOf(a), t0 + 10_000))?.content).toBe("lives in Lisbon");
    expect((await s.memoryAsOf(idOf(a), Date.now()))?.content).toBe("lives in Porto");
    expect(await s.memoryAsOf(idOf(a), t0 - 10_000)).toBeUndefined();
    const page = await s.entityAsOf({ namespace: n, entity: "e", asOf: t0 + 10_000 });
    expect(page.memories.map((m) => m.content)).toEqual(["lives in Lisbon"]);
  },

  "Webhooks: a subscription kept and changed in one transaction, its log capped, leases exclusive": async (s) => {
    const id = `wh_${ns("hook")}`;
    const w = webhook(id);
    await s.insertWebhook(w);
    expect(await s.getWebhook(id)).toEqual(w);
    expect((await s.listWebhooks()).map((x) => x.id)).toContain(id);
    expect(await s.leaseWebhook(id, "r1", 60_000)).toBe(true);
    if (s.backend === "postgres") expect(await s.leaseWebhook(id, "r2", 60_000)).toBe(false);
    // A change under a lease another owner holds changes nothing (PostgreSQL; LMDB has one process).
    if (s.backend === "postgres")
      expect(await s.updateWebhook(id, (c) => ({ ...c, cursor: 9 }), { owner: "r2" })).toBeUndefined();
    for (let i = 1; i <= 105; i++) {
      const d = {
        webhookId: id,
        seq: i,
        messageId: `m${i}`,
        eventKind: "ADD",
        namespace: "a/b",
        atMs: 1000 + i,
        attempt: 1,
        status: 200,
        ok: true,
        error: null,
        durationMs: 1,
      };
      const after = await s.updateWebhook(id, (c) => ({ ...c, cursor: i }), { owner: "r1", deliveries: [d] });
      expect(after?.cursor).toBe(i);
    }
    const log = await s.webhookDeliveries(id, 1000);
    expect(log.length).toBe(100);
    expect(log[0].seq).toBe(105);
    await s.releaseWebhook(id, "r1");
    expect(await s.leaseWebhook(id, "r2", 60_000)).toBe(true);
    expect(await s.deleteWebhook(id)).toBe(true);
    expect(await s.getWebhook(id)).toBeUndefined();
    expect(await s.webhookDeliveries(id, 10)).toEqual([]);
    expect(await s.deleteWebhook(id)).toBe(false);
  },

  "Webhooks: cursors of several subscriptions moved in one write, their logs capped, edits and leases kept": async (
    s,
  ) => {
    const hook = (id: string) => webhook(id, { failingSince: 5, lastError: "was failing" });
    const [a, b, c] = ["a", "b", "c"].map((x) => `wh_${ns(`adv-${x}`)}`);
    for (const id of [a, b, c]) {
      await s.insertWebhook(hook(id));
      expect(await s.leaseWebhook(id, "r1", 60_000)).toBe(true);
    }
    const delivered = (webhookId: string, seq: number) => ({
      webhookId,
      seq,
      messageId: `m${seq}`,
      eventKind: "ADD",
      namespace: "a/b",
      atMs: 1000 + seq,
      attempt: 1,
      status: 200,
      ok: true,
      error: null,
      durationMs: 1,
    });
    const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i);
    // a: 60 then 50 successes (the log keeps 100); b: only passed events; c: edited since (rev 1).
    await s.updateWebhook(c, (w) => ({ ...w, rev: 1 }));
    let after = await s.advanceWebhooks("r1", [
      { id: a, rev: 0, cursor: 60, deliveries: range(1, 60).map((q) => delivered(a, q)) },
      { id: b, rev: 0, cursor: 40, deliveries: [] },
      { id: c, rev: 0, cursor: 9, deliveries: [delivered(c, 9)] },
      { id: `wh_${ns("none")}`, rev: 0, cursor: 1, deliveries: [] },
    ]);
    expect(after.map((w) => w && [w.cursor, w.rev, w.failingSince, w.lastDeliveredAt, w.lastError])).toEqual([
      [60, 0, null, 1060, null],
      [40, 0, 5, null, "was failing"],
      [0, 1, 5, null, "was failing"],
      undefined,
    ]);
    after = await s.advanceWebhooks("r1", [
      { id: a, rev: 0, cursor: 110, deliveries: range(61, 110).map((q) => delivered(a, q)) },
      // A cursor never moves back.
      { id: b, rev: 0, cursor: 30, deliveries: [] },
    ]);
    expect(after.map((w) => w?.cursor)).toEqual([110, 40]);
    expect(await s.getWebhook(a)).toEqual({
      ...hook(a),
      cursor: 110,
      failingSince: null,
      lastDeliveredAt: 1110,
      lastError: null,
    });
    const log = await s.webhookDeliveries(a, 1000);
    expect(log.map((d) => d.seq)).toEqual(range(11, 110).reverse());
    expect(log[0]).toEqual(delivered(a, 110));
    expect((await s.webhookDeliveries(c, 10)).map((d) => d.seq)).toEqual([9]);
    expect(await s.webhookDeliveries(b, 10)).toEqual([]);
    // Under a lease another owner holds: nothing moves (PostgreSQL; LMDB has one process).
    if (s.backend === "postgres") {
      await s.releaseWebhook(b, "r1");
      expect(await s.leaseWebhook(b, "r2", 60_000)).toBe(true);
      expect(await s.advanceWebhooks("r1", [{ id: b, rev: 0, cursor: 99, deliveries: [] }])).toEqual([undefined]);
      expect((await s.getWebhook(b))?.cursor).toBe(40);
    }
    for (const id of [a, b, c]) expect(await s.deleteWebhook(id)).toBe(true);
  },

  "Webhooks: the leases an owner holds renewed in one call, never one given up or taken over": async (s) => {
    const [a, b, c] = ["a", "b", "c"].map((x) => `wh_${ns(`renew-${x}`)}`);
    for (const id of [a, b, c]) {
      await s.insertWebhook(webhook(id));
      expect(await s.leaseWebhook(id, "r1", 60_000)).toBe(true);
    }
    const gone = `wh_${ns("renew-none")}`;
    expect(await s.renewWebhookLeases([], "r1", 60_000)).toEqual(new Set());
    expect(await s.renewWebhookLeases([a, b, c, gone], "r1", 60_000)).toEqual(
      s.backend === "postgres" ? new Set([a, b, c]) : new Set([a, b, c, gone]),
    );
    if (s.backend === "postgres") {
      // b given up, c taken over once expired: only a is still r1's.
      await s.releaseWebhook(b, "r1");
      expect(await s.renewWebhookLeases([c], "r1", 1)).toEqual(new Set([c]));
      await Bun.sleep(5);
      expect(await s.leaseWebhook(c, "r2", 60_000)).toBe(true);
      expect(await s.renewWebhookLeases([a, b, c], "r1", 60_000)).toEqual(new Set([a]));
      // The one given up stays free: another replica takes it at once.
      expect(await s.leaseWebhook(b, "r2", 60_000)).toBe(true);
      expect(await s.renewWebhookLeases([a, b, c], "r2", 60_000)).toEqual(new Set([b, c]));
    }
    for (const id of [a, b, c]) expect(await s.deleteWebhook(id)).toBe(true);
  },

  "Webhooks: the trail by seq, filtered by namespace pattern and kind, never passing an event": async (s) => {
    const n = ns("trail");
    const start = (await s.trailAfter(0, { namespaces: [], kinds: [] }, 1)).scannedTo;
    const a = add(`${n}/x`, "one");
    await s.apply([a], "k");
    await s.apply([add(`${n}-other`, "not wanted")], "k");
    await s.apply([{ event: "DELETE", target: idOf(a), reason: "deleted" }], "k");
    await s.apply([add(`${n}/y`, "two")], "k");
    const read = async (kinds: ("ADD" | "DELETE")[], limit = 10) => {
      // The horizon may trail a commit by a moment on PostgreSQL: read until it has all four.
      for (let tries = 0; ; tries++) {
        const page = await s.trailAfter(start, { namespaces: [`${n}/*`], kinds }, limit);
        const end = (await s.trailAfter(start, { namespaces: [], kinds: [] }, 1)).scannedTo;
        if (page.scannedTo >= end || tries > 100) return page;
        await Bun.sleep(10);
      }
    };
    const all = await read([]);
    expect(all.events.map((e) => [e.namespace.slice(n.length), e.event])).toEqual([
      ["/x", "ADD"],
      ["/x", "DELETE"],
      ["/y", "ADD"],
    ]);
    expect(all.events.map((e) => e.seq)).toEqual([...all.events.map((e) => e.seq)].sort((x, y) => x - y));
    expect((await read(["DELETE"])).events.map((e) => e.event)).toEqual(["DELETE"]);
    const firstOnly = await s.trailAfter(start, { namespaces: [`${n}/*`], kinds: [] }, 1);
    expect(firstOnly.events.length).toBe(1);
    // A full page ends before the next matching event: a cursor at scannedTo passes none.
    expect(firstOnly.scannedTo).toBeGreaterThanOrEqual(firstOnly.events[0].seq);
    expect(firstOnly.scannedTo).toBeLessThan(all.events[1].seq);
    expect((await s.eventsBySeq([all.events[1].seq, all.events[0].seq])).map((e) => e?.event)).toEqual([
      "DELETE",
      "ADD",
    ]);
  },

  "Webhooks: an erasure takes a seq of the trail after its DELETEs, with no current memory left too": async (s) => {
    const n = ns("erased");
    const start = (await s.trailAfter(0, { namespaces: [], kinds: [] }, 1)).scannedTo;
    const a = add(n, "carol's address", { entity: "carol" });
    await s.apply([a], "k");
    await s.apply([{ event: "DELETE", target: idOf(a), reason: "deleted" }], "k");
    await s.erase(n, "carol", "k");
    await s.apply([add(`${n}-other`, "not wanted")], "k");
    await s.erase(`${n}-other`, "e", "k");
    await s.apply([add(n, "after", { entity: "dave" })], "k");
    let page = await s.trailAfter(start, { namespaces: [n], kinds: ["ADD"] }, 10);
    // The horizon may trail a commit by a moment on PostgreSQL.
    for (let tries = 0; page.events.length < 2 && tries < 100; tries++) {
      await Bun.sleep(10);
      page = await s.trailAfter(start, { namespaces: [n], kinds: ["ADD"] }, 10);
    }
    expect(page.events.map((e) => e.entity)).toEqual(["carol", "dave"]);
    expect(page.erasures.map((e) => [e.namespace, e.entity, e.memories])).toEqual([[n, "carol", 1]]);
    const [erasure] = page.erasures;
    expect(erasure.seq).toBeGreaterThan(page.events[0].seq);
    expect(erasure.seq).toBeLessThan(page.events[1].seq);
    expect(await s.eventsBySeq([erasure.seq])).toEqual([undefined]);
    // A page that stops before it does not pass it.
    const first = await s.trailAfter(start, { namespaces: [n], kinds: [] }, 1);
    expect(first.erasures).toEqual([]);
    expect(first.scannedTo).toBeLessThan(erasure.seq);
    // An erasure the last of the trail: the end of the trail is past it.
    await s.erase(n, "dave", "k");
    let end = (await s.trailAfter(0, { namespaces: [], kinds: [] }, 1)).scannedTo;
    for (let tries = 0; end <= page.events[1].seq + 1 && tries < 100; tries++) {
      await Bun.sleep(10);
      end = (await s.trailAfter(0, { namespaces: [], kinds: [] }, 1)).scannedTo;
    }
    const last = await s.trailAfter(erasure.seq, { namespaces: [n], kinds: [] }, 10);
    expect(last.erasures.map((e) => e.entity)).toEqual(["dave"]);
    expect(last.scannedTo).toBe(end);
  },

  "Webhooks: the count of committed erasures goes up with each erasure, and with nothing else": async (s) => {
    const n = ns("erasure-count");
    const a = add(n, "erin's phone", { entity: "erin" });
    await s.apply([a], "k");
    const before = await s.erasuresCommitted();
    await s.apply([add(n, "frank's phone", { entity: "frank" })], "k");
    await s.apply([{ event: "DELETE", target: idOf(a), reason: "deleted" }], "k");
    expect(await s.erasuresCommitted()).toBe(before);
    await s.erase(n, "erin", "k");
    expect(await s.erasuresCommitted()).toBe(before + 1);
    // At once, whatever seq each takes and in whatever order they commit.
    await Promise.all(["frank", "gina", "hal"].map((e) => s.erase(n, e, "k")));
    expect(await s.erasuresCommitted()).toBe(before + 4);
  },

  "Upkeep: an open store is ready, and its figures count what was written": async (s) => {
    expect(await s.notReadyReason()).toBeUndefined();
    const before = await s.stats();
    await s.apply([add(ns("stats"), "counted")], "k");
    const after = await s.stats();
    expect([after.currentMemories - before.currentMemories, after.events - before.events]).toEqual([1, 1]);
  },
};

/** The roles Storage is made of (src/storage/storage.ts), read from its declaration. */
const roles = /export interface Storage\s+extends([^{]+)\{/
  .exec(readFileSync(join(import.meta.dir, "../../src/storage/storage.ts"), "utf8"))![1]
  .split(",")
  .map((r) => r.trim());

test("every role of Storage has cases here, and every case names its role", () => {
  const named = Object.keys(cases).map((name) => name.split(":")[0]);
  expect(roles.length).toBeGreaterThan(5);
  for (const role of roles) expect(named).toContain(role);
  for (const role of named) expect(roles).toContain(role);
});

test("the suite runs on LMDB, and on PostgreSQL whenever make test provides one", () => {
  const names = backends.map((b) => b.name);
  expect(names[0]).toBe("lmdb");
  if (process.env.MEMD_TEST_DATABASE_URL !== undefined) expect(names).toContain("postgres");
});

for (const backend of backends) {
  describe(`storage contract on ${backend.name}`, () => {
    let opened: Awaited<ReturnType<Backend["open"]>>;
    beforeAll(async () => (opened = await backend.open()));
    afterAll(() => opened?.close());
    for (const [name, run] of Object.entries(cases)) test(name, () => run(opened.storage, backend), 60_000);
  });
}
