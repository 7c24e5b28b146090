// @targets postgres
// A PostgreSQL database of the release before the delivery log became one row per subscription
// (a row per attempt in webhook_deliveries) is brought up at start: each subscription's newest
// 100 attempts move to its row of webhook_logs, newest first, and the count of committed
// erasures starts at the erasures already made.
import { afterAll, expect, test } from "bun:test";
import { SQL } from "bun";
import { openPostgres } from "../../src/storage/postgres/index";
import { migrations, SCHEMA_VERSION } from "../../src/storage/postgres/schema";
import { freshDatabase } from "../helpers";

const url = await freshDatabase();
const sql = new SQL({ url, max: 1 });
afterAll(() => sql.close());

/** The schema version of the release before: its next step counts the erasures. */
const before = migrations.findIndex((m) => m.includes("CREATE TABLE erasures_committed"));

test("the delivery log's rows become one row per subscription, the newest 100 first; erasures are counted", async () => {
  expect(before).toBeGreaterThan(0);
  await sql`CREATE TABLE memd_schema (id int PRIMARY KEY, version int NOT NULL)`;
  for (const step of migrations.slice(0, before)) await sql.unsafe(step);
  await sql`INSERT INTO memd_schema (id, version) VALUES (1, ${before})`;
  const attempt = (id: string, seq: number) =>
    JSON.stringify({
      webhookId: id,
      seq,
      messageId: `msg_${seq}_${id}`,
      eventKind: "ADD",
      namespace: "n",
      atMs: seq,
      attempt: 1,
      status: 200,
      ok: true,
      error: null,
      durationMs: 1,
    });
  // Two subscriptions: one with 120 attempts logged (older than the newest 100 too), one with 3;
  // each a JSON object, as that release wrote them (json_array_elements).
  for (let seq = 1; seq <= 120; seq++)
    await sql`INSERT INTO webhook_deliveries (webhook_id, doc) VALUES ('wh_a', ${attempt("wh_a", seq)}::text::json)`;
  for (let seq = 1; seq <= 3; seq++)
    await sql`INSERT INTO webhook_deliveries (webhook_id, doc) VALUES ('wh_b', ${attempt("wh_b", seq)}::text::json)`;
  for (const entity of ["x", "y"])
    await sql`INSERT INTO erasures ${sql({ namespace: "n", entity, at_ms: 1, actor_key_id: "k", memories: 0, events: 0 })}`;

  const upgraded = await openPostgres({ url, pool: 2, connectTimeoutMs: 5000, statementTimeoutMs: 10000 });
  try {
    expect(await sql`SELECT version FROM memd_schema`).toEqual([{ version: SCHEMA_VERSION }]);
    const a = await upgraded.webhookDeliveries("wh_a", 1000);
    expect(a.map((d) => d.seq)).toEqual(Array.from({ length: 100 }, (_, i) => 120 - i));
    expect((await upgraded.webhookDeliveries("wh_a", 5)).map((d) => d.seq)).toEqual([120, 119, 118, 117, 116]);
    expect((await upgraded.webhookDeliveries("wh_b", 1000)).map((d) => d.seq)).toEqual([3, 2, 1]);
    expect(await upgraded.webhookDeliveries("wh_none", 10)).toEqual([]);
    expect(await upgraded.erasuresCommitted()).toBe(2);
  } finally {
    await upgraded.close();
  }
});
