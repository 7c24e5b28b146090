// @targets postgres
// A PostgreSQL database whose stored terms were made by the previous tokenizer (folded words, no
// stemming) is rebuilt by the schema step at start: the stored terms are the new forms, and a
// search finds by stem what the old terms could not match.
import { afterAll, expect, test } from "bun:test";
import { SQL } from "bun";
import { openPostgres } from "../../src/storage/postgres/index";
import { SCHEMA_VERSION } from "../../src/storage/postgres/schema";
import type { MemoryOp } from "../../src/storage/storage";
import { queryTerms, termCounts, tokenize } from "../../src/text/tokens";
import { freshDatabase } from "../helpers";

const url = await freshDatabase();
const open = () => openPostgres({ url, pool: 2, connectTimeoutMs: 5000, statementTimeoutMs: 10000 });
const sql = new SQL({ url, max: 1 });
afterAll(() => sql.close());

const content = "Melanie is painting sunrises with her kids";
const add = (id: string): MemoryOp => ({
  create: { id, namespace: "up", entity: "u", content, category: "general", importance: 0.5 },
  event: "ADD",
});

test("the stored terms of an older tokenizer are rebuilt at start, and a search by stem finds them", async () => {
  const id = Bun.randomUUIDv7();
  const first = await open();
  await first.apply([add(id)], null);
  await first.close();
  // As the previous release left it: its schema version, terms as folded words only.
  await sql`DELETE FROM memory_terms`;
  const old = new Map<string, number>();
  for (const t of tokenize(content)) old.set(t, (old.get(t) ?? 0) + 1);
  for (const [term, tf] of old)
    await sql`INSERT INTO memory_terms ${sql({ namespace: "up", entity: "u", term, memory_id: id, tf, doc_len: tokenize(content).length })}`;
  await sql`UPDATE memd_schema SET version = ${SCHEMA_VERSION - 1}`;
  await sql`UPDATE search_state SET needs_rebuild = false`;
  const terms = async () =>
    (await sql`SELECT term, tf FROM memory_terms ORDER BY term`).map((r: { term: string; tf: number }) => [
      r.term,
      r.tf,
    ]);
  expect(await terms()).toContainEqual(["painting", 1]);

  const upgraded = await open();
  try {
    expect(await sql`SELECT version FROM memd_schema`).toEqual([{ version: SCHEMA_VERSION }]);
    expect(await terms()).toEqual([...termCounts(content).tf].sort((a, b) => (a[0] < b[0] ? -1 : 1)));
    expect(await terms()).toContainEqual(["paint", 1]);
    const hits = await upgraded.keywordSearch(
      { namespace: "up", entity: "u" },
      queryTerms("who paints a sunrise?"),
      {},
      5,
    );
    expect(hits.map((h) => h.memory.id)).toEqual([id]);
  } finally {
    await upgraded.close();
  }
});
