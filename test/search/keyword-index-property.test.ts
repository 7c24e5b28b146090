// @targets lmdb postgres
// Property test of the keyword index, on the backend under test (MEMD_TEST_BACKEND): a random
// sequence of adds, merges, replaces, deletes and expiries, and after each step the index kept
// incrementally ranks exactly as one rebuilt from scratch (and on LMDB holds the same bytes).
import { afterAll, beforeAll, expect, test } from "bun:test";
import { KeywordSpace } from "../../src/index/keyword";
import { openLmdb } from "../../src/storage/lmdb/index";
import { isCurrent, type MemoryRecord } from "../../src/storage/records";
import type { MemoryOp, Storage } from "../../src/storage/storage";
import { bm25n, idf, lengthNormOf, type QueryTerm } from "../../src/text/scoring";
import { queryTerms, termCounts } from "../../src/text/tokens";
import { backend, freshDatabase, seededRandom, tempDir } from "../helpers";

let storage: Storage;
const tmp = tempDir();
beforeAll(async () => {
  if (backend === "postgres") {
    const { openPostgres } = await import("../../src/storage/postgres/index");
    storage = await openPostgres({
      url: await freshDatabase(),
      pool: 4,
      connectTimeoutMs: 5000,
      statementTimeoutMs: 10000,
    });
  } else storage = await openLmdb(tmp.dir);
});
afterAll(async () => {
  await storage.close();
  tmp.cleanup();
});

const vocab =
  "tea coffee Café cafe dog cat Lisbon paris nurse piano runs daily vegan meat 北京 烤鸭 sails boat red blue".split(
    " ",
  );

async function indexDump(): Promise<string> {
  if (storage.backend !== "lmdb") return "";
  const { dbs } = storage as Awaited<ReturnType<typeof openLmdb>>;
  const out: string[] = [];
  for (const { key, value } of dbs.namespaceMemories.getRange({})) out.push(JSON.stringify([key, value]));
  return out.join("\n");
}

/**
 * BM25 top-k from scratch, from LMDB's index of record (the memories namespace_memories lists, their records'
 * content tokenized), with no pruning: the scores
 * of what the search must return, rounded (sums may be made in another order).
 */
function bruteForce(scope: { namespace: string; entity?: string }, terms: QueryTerm[], limit: number, now: number) {
  const { dbs } = storage as Awaited<ReturnType<typeof openLmdb>>;
  const docs: { id: string; tf: Map<string, number>; len: number }[] = [];
  for (const key of dbs.namespaceMemories.getKeys({
    start: [scope.namespace],
    end: [scope.namespace, "\uffff"],
  })) {
    const [, id] = key as string[];
    const r = dbs.memories.get(id) as MemoryRecord;
    if (scope.entity !== undefined && r.entity !== scope.entity) continue;
    const { tf, length } = termCounts(r.content);
    docs.push({ id, tf, len: length });
  }
  // The scope's average length and b (text/scoring.ts lengthNormB: the spread of its lengths).
  const avg = lengthNormOf(docs.map((d) => d.len));
  const w = terms.map((t) => t.weight * idf(docs.length, docs.filter((d) => d.tf.has(t.term)).length));
  return docs
    .map((d) => ({
      id: d.id,
      score: terms.reduce((a, t, i) => a + (d.tf.has(t.term) ? bm25n(w[i], d.tf.get(t.term)!, d.len, avg) : 0), 0),
    }))
    .filter((h) => h.score > 0 && isCurrent(dbs.memories.get(h.id) as MemoryRecord | undefined, now))
    .map((h) => h.score)
    .sort((a, b) => b - a)
    .slice(0, limit)
    .map((x) => x.toFixed(9));
}

test("incremental index ranks exactly as a rebuilt one after every step", async () => {
  const seed = Number(process.env.SEARCH_PROPERTY_SEED ?? 20260101);
  const rand = seededRandom(seed);
  const pick = <T>(xs: readonly T[]) => xs[Math.floor(rand() * xs.length)];
  const text = () => Array.from({ length: 1 + Math.floor(rand() * 7) }, () => pick(vocab)).join(" ");
  const ns = "prop";
  const entities = ["a", "b", "c"];
  let now = Date.now();
  const live = new Map<string, MemoryRecord>();
  const create = () => ({
    id: Bun.randomUUIDv7(),
    namespace: ns,
    entity: pick(entities),
    content: text(),
    category: "general",
    importance: 0.5,
    ...(rand() < 0.2 ? { ttlSeconds: 1 + Math.floor(rand() * 3) } : {}),
  });
  let hits = 0;
  const steps = backend === "postgres" ? 60 : 150;
  for (let step = 0; step < steps; step++) {
    now += 700;
    const current = [...live.values()];
    const ops: MemoryOp[] = [];
    const n = 1 + Math.floor(rand() * 3); // sometimes several ops in one transaction
    for (let i = 0; i < n; i++) {
      const r = rand();
      const target = current.length ? pick(current) : undefined;
      if (!target || r < 0.4) ops.push({ event: "ADD", create: create() });
      else if (r < 0.6) ops.push({ event: "MERGE", target: target.id, patch: { content: text() } });
      else if (r < 0.7) ops.push({ event: "UPDATE", target: target.id, patch: { category: "other" } });
      else if (r < 0.8) ops.push({ event: "REPLACE", target: target.id, reason: "x", create: create() });
      else if (r < 0.9) ops.push({ event: "DELETE", target: target.id, reason: "deleted" });
      else {
        const due = current.find((m) => m.expiresAt !== undefined && m.expiresAt <= now);
        if (due) ops.push({ event: "DELETE", target: due.id, reason: "expired", expiresAt: due.expiresAt });
        else ops.push({ event: "SKIP_DUPLICATE", target: target.id, newContent: "same" });
      }
    }
    const done = await storage.apply(ops, null, now);
    for (const d of done) {
      if (!d) continue;
      if (d.memory.state === "current") live.set(d.memory.id, d.memory);
      else live.delete(d.memory.id);
      if (d.event.mergedFromId) live.delete(d.event.mergedFromId);
    }
    for (const [id, m] of live) if (m.expiresAt !== undefined && m.expiresAt <= now && rand() < 0.1) live.delete(id);

    const queries = [pick(vocab), `${pick(vocab)} ${pick(vocab)} ${pick(vocab)}`, "cafe 北京烤鸭"];
    const scopes = [{ namespace: ns }, { namespace: ns, entity: pick(entities) }];
    const run = async () => {
      const out: unknown[] = [];
      for (const q of queries)
        for (const scope of scopes)
          out.push(
            (await storage.keywordSearch(scope, queryTerms(q), {}, 5, now)).map((h) => [h.memory.id, h.score]),
            (await storage.keywordSearch(scope, queryTerms(q), {}, 100, now)).map((h) => [h.memory.id, h.score]),
          );
      return out;
    };
    const incremental = await run();
    // (MaxScore's pruning against every document scored: test/storage/keyword-maxscore-exact.test.ts.)
    if (storage.backend === "lmdb")
      for (const q of queries)
        for (const scope of scopes)
          for (const limit of [3, 100]) {
            const got = await storage.keywordSearch(scope, queryTerms(q), {}, limit, now);
            expect(got.map((h) => h.score.toFixed(9))).toEqual(bruteForce(scope, queryTerms(q), limit, now));
          }
    hits += incremental.flat().length;
    const dump = await indexDump();
    await storage.rebuildSearchIndex();
    const rebuilt = await run();
    expect({ step, seed, incremental }).toEqual({ step, seed, incremental: rebuilt });
    expect(await indexDump()).toBe(dump);
  }
  expect(hits).toBeGreaterThan(steps * 10); // the queries do find memories
}, 300_000);

test("semantic search follows every change of vectors at once, after the scope was searched", async () => {
  const ns = "vec-follow";
  const unit = (i: number) => Float32Array.from({ length: 16 }, (_, j) => (j === i ? 1 : 0.01));
  const add = (entity: string, i: number) =>
    ({
      event: "ADD",
      create: {
        id: Bun.randomUUIDv7(),
        namespace: ns,
        entity,
        content: `m${i}`,
        category: "general",
        importance: 0.5,
        vector: unit(i),
      },
    }) satisfies MemoryOp;
  const [a, b, c] = await storage.apply([add("x", 0), add("x", 1), add("y", 2)], null);
  const top = async (i: number, entity?: string) =>
    (await storage.semanticSearch({ namespace: ns, entity }, unit(i), {}, 1)).map((h) => h.memory.id);
  // Searched once: the namespace's vectors are now held in memory on LMDB.
  expect(await top(0)).toEqual([a!.memory.id]);
  expect(await top(2, "x")).not.toContain(c!.memory.id);
  // A new vector is found at once; a merge with a new vector moves the memory.
  const [d] = await storage.apply([add("y", 3)], null);
  expect(await top(3)).toEqual([d!.memory.id]);
  await storage.apply([{ event: "MERGE", target: a!.memory.id, patch: { content: "m5", vector: unit(5) } }], null);
  expect(await top(5)).toEqual([a!.memory.id]);
  expect(await top(0)).not.toContain(a!.memory.id);
  // A content change without a vector drops it; a deleted or replaced memory is never returned.
  await storage.apply([{ event: "MERGE", target: b!.memory.id, patch: { content: "m1 again" } }], null);
  expect((await storage.semanticSearch({ namespace: ns }, unit(1), {}, 10)).map((h) => h.memory.id)).not.toContain(
    b!.memory.id,
  );
  await storage.apply([{ event: "DELETE", target: c!.memory.id, reason: "deleted" }], null);
  expect((await storage.semanticSearch({ namespace: ns }, unit(2), {}, 10)).map((h) => h.memory.id)).not.toContain(
    c!.memory.id,
  );
  const [e] = await storage.apply(
    [{ event: "REPLACE", target: d!.memory.id, reason: "x", create: add("y", 3).create }],
    null,
  );
  const hits = (await storage.semanticSearch({ namespace: ns }, unit(3), {}, 10)).map((h) => h.memory.id);
  expect(hits[0]).toBe(e!.memory.id);
  expect(hits).not.toContain(d!.memory.id);
  // Pending then set by the embedding worker.
  await storage.apply([{ event: "MERGE", target: e!.memory.id, patch: { content: "m7", vector: "pending" } }], null);
  expect(await top(3)).not.toContain(e!.memory.id);
  const [p] = await storage.pendingEmbeddings(10);
  expect(await storage.setVectors([{ id: p.id, updatedAt: p.updatedAt, vector: unit(7) }])).toBe(1);
  expect(await top(7)).toEqual([e!.memory.id]);
  expect(await top(7, "y")).toEqual([e!.memory.id]);
  expect(await top(7, "x")).not.toContain(e!.memory.id);
});

test("in-memory keyword lists stay exact through removals and compaction", () => {
  const space = new KeywordSpace(5);
  const rand = seededRandom(7);
  const live = new Map<string, { entity: string; v: (string | number)[] }>();
  // Half the ids are UUIDs (kept as 16 bytes), half any other string (kept aside).
  const idPool = Array.from({ length: 60 }, (_, i) =>
    i % 2 ? `m${i}` : `0${i.toString(16).padStart(7, "0")}-0000-7000-8000-${(i * 7919).toString(16).padStart(12, "0")}`,
  );
  for (let i = 0; i < 400; i++) {
    const id = idPool[Math.floor(rand() * idPool.length)];
    if (rand() < 0.35) {
      space.remove(id);
      live.delete(id);
      expect(space.docOf(id)).toBeUndefined();
      continue;
    }
    const entity = `e${i % 3}`;
    const v: (string | number)[] = [3, i, entity];
    for (const t of new Set([vocab[Math.floor(rand() * 6)], vocab[Math.floor(rand() * 6)]])) v.push(t, 1 + (i % 3));
    space.add(id, v);
    live.set(id, { entity, v });
    expect(space.stats).toEqual({ docs: live.size, totalLength: 3 * live.size });
    for (const id of live.keys()) expect(space.idOf(space.docOf(id)!)).toBe(id);
    // Every live memory, and nothing else, is reachable with its own terms.
    for (const [term, list] of space.lists) {
      const want = [...live].filter(([, m]) => m.v.includes(term)).map(([id]) => id);
      const got: string[] = [];
      for (let k = 0; k < list.n; k++) if (!space.gone[list.docAt(k)]) got.push(space.idOf(list.docAt(k)));
      expect(got.sort()).toEqual(want.sort());
      expect(list.live).toBe(want.length);
    }
    for (const e of ["e0", "e1", "e2"]) {
      const docs = [...(space.entityDocuments(e)?.docs ?? [])].filter((d) => !space.gone[d]);
      expect(space.entityDocuments(e)?.live ?? 0).toBe(docs.length);
      expect(docs.map((d) => space.idOf(d)).sort()).toEqual(
        [...live]
          .filter(([, m]) => m.entity === e)
          .map(([id]) => id)
          .sort(),
      );
    }
    for (const d of space.entityDocuments(entity)!.docs) {
      if (space.gone[d]) continue;
      const m = live.get(space.idOf(d))!;
      const pairs: (string | number)[] = [];
      for (let k = 0; k < space.listsOf(d); k++)
        pairs.push([...space.lists].find(([, l]) => l.id === space.termIds[k])![0], space.termTfs[k]);
      expect([space.docLen[d], space.docCreated[d], m.entity, ...pairs]).toEqual(m.v);
    }
  }
});

test("every document keeps its length and time however far the arrays grow (documents 2,048 and 4,096-4,098 lost theirs)", () => {
  const space = new KeywordSpace();
  for (let i = 0; i < 9000; i++) space.add(Bun.randomUUIDv7(), [1 + (i % 7), i + 1, `e${i % 5}`, "tea", 1]);
  for (let d = 0; d < 9000; d++) expect([d, space.docLen[d], space.docCreated[d]]).toEqual([d, 1 + (d % 7), d + 1]);
});

// LMDB's loader (lmdb/touched.ts); PostgreSQL's slices are tested in keyword-lists-on-postgres.test.ts.
test.skipIf(backend !== "lmdb")(
  "a namespace's first search loads it in slices: other work runs between them, and writes meanwhile are followed exactly",
  async () => {
    const ns = "slices";
    const unit = (i: number) => Float32Array.from({ length: 8 }, (_, j) => (j === i % 8 ? 1 : 0.01 * (i % 5)));
    const add = (i: number): MemoryOp => ({
      event: "ADD",
      create: {
        id: Bun.randomUUIDv7(),
        namespace: ns,
        entity: `e${i % 3}`,
        content: `${vocab[i % vocab.length]} ${vocab[(i * 7) % vocab.length]} n${i}`,
        category: "general",
        importance: 0.5,
        vector: unit(i),
      },
    });
    const first = await storage.apply(
      Array.from({ length: 300 }, (_, i) => add(i)),
      null,
    );
    const ids = first.map((d) => d!.memory.id);
    const queries = ["tea cafe", "dog", "n7 n8 piano"];
    const answers = async () => {
      const out: unknown[] = [];
      for (const q of queries)
        for (const entity of [undefined, "e1"])
          out.push(
            (await storage.keywordSearch({ namespace: ns, entity }, queryTerms(q), {}, 20)).map((h) => [
              h.memory.id,
              h.score.toFixed(9),
            ]),
          );
      for (const i of [0, 3, 6])
        out.push((await storage.semanticSearch({ namespace: ns }, unit(i), {}, 20)).map((h) => h.memory.id));
      return out;
    };
    const { loading } = await import("../../src/storage/lmdb/touched");
    const { slice, between } = loading;
    loading.slice = 7; // about 43 slices for 300 memories
    try {
      await storage.rebuildSearchIndex(); // a process that has not searched this namespace yet
      let turns = 0;
      let writes: Promise<unknown> | undefined;
      // After the first slice, the writes run (and commit) before the load goes on.
      loading.between = async () => {
        turns++;
        writes ??= Promise.all([
          storage.apply([{ event: "DELETE", target: ids[1], reason: "deleted" }], null),
          storage.apply(
            [{ event: "MERGE", target: ids[2], patch: { content: "piano piano tea", vector: unit(3) } }],
            null,
          ),
          storage.apply([add(1000), add(1001)], null),
          storage.apply([{ event: "DELETE", target: ids[299], reason: "deleted" }], null),
        ]);
        await writes;
      };
      await answers();
      expect(turns).toBeGreaterThan(40);
      const loaded = await answers();
      await storage.rebuildSearchIndex(); // loaded again from LMDB, with nothing written meanwhile
      expect(loaded).toEqual(await answers());
      expect(JSON.stringify(loaded)).not.toContain(ids[1]);
      expect(JSON.stringify(loaded)).not.toContain(ids[299]);
    } finally {
      Object.assign(loading, { slice, between });
    }
  },
);
