// @targets postgres pgbouncer
// A PostgreSQL database left by the release before stemming (its schema version, its stored
// terms folded words only) is brought up by the schema steps at start: the stored terms are
// rebuilt in the new form, and a search finds by stem what the old terms could not match.
import { afterAll, expect, test } from "bun:test";
import { SQL } from "bun";
import { openPostgres } from "../../src/storage/postgres/index";
import { migrations, SCHEMA_VERSION } from "../../src/storage/postgres/schema";
import { queryTerms, termCounts, tokenize } from "../../src/text/tokens";
import { freshDatabase } from "../helpers";

const url = await freshDatabase();
const sql = new SQL({ url, max: 1 });
afterAll(() => sql.close());

/** The schema version of the release before stemming: the step that rebuilds for it is next. */
const before = migrations.findIndex((m) =>
  m.includes("needs_rebuild = true WHERE EXISTS (SELECT 1 FROM memories WHERE state = 'current');"),
);
const content = "Melanie is painting sunrises with her kids";

test("the stored terms of an older tokenizer are rebuilt at start, and a search by stem finds them", async () => {
  expect(before).toBeGreaterThan(0);
  // The older release's schema, one memory and its terms as that release wrote them.
  await sql`CREATE TABLE memd_schema (id int PRIMARY KEY, version int NOT NULL)`;
  for (const step of migrations.slice(0, before)) await sql.unsafe(step);
  await sql`INSERT INTO memd_schema (id, version) VALUES (1, ${before})`;
  const id = Bun.randomUUIDv7();
  const now = Date.now();
  await sql`INSERT INTO memories ${sql({ id, namespace: "up", entity: "u", content, category: "general", importance: 0.5, created_at: now, updated_at: now, state: "current" })}`;
  const words = tokenize(content);
  const old = new Map<string, number>();
  for (const t of words) old.set(t, (old.get(t) ?? 0) + 1);
  for (const [term, tf] of old)
    await sql`INSERT INTO memory_terms ${sql({ namespace: "up", entity: "u", term, memory_id: id, tf, doc_len: words.length })}`;
  for (const entity of ["", "u"])
    await sql`INSERT INTO search_stats ${sql({ namespace: "up", entity, docs: 1, total_len: words.length })}`;
  await sql`UPDATE search_state SET needs_rebuild = false`;
  const terms = async () =>
    (await sql`SELECT term, tf FROM memory_terms ORDER BY term`).map((r: { term: string; tf: number }) => [
      r.term,
      r.tf,
    ]);
  expect(await terms()).toContainEqual(["painting", 1]);

  const upgraded = await openPostgres({ url, pool: 2, connectTimeoutMs: 5000, statementTimeoutMs: 10000 });
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
