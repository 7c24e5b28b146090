// @targets postgres
// PostgreSQL's keyword ranking takes BM25's b from the spread of a scope's lengths (issue 36), so
// search_stats keeps the sum of the squared lengths beside their sum. A database from before has
// no such column: its schema step adds it and fills it from the stored postings. Checked here
// against what the writes themselves kept: the step's figures are the same, and so are the scores.
import { afterAll, expect, test } from "bun:test";
import { SQL } from "bun";
import { openPostgres } from "../../src/storage/postgres/index";
import { migrations } from "../../src/storage/postgres/schema";
import type { MemoryOp } from "../../src/storage/storage";
import { NEIGHBOUR_SHARE } from "../../src/text/scoring";
import { queryTerms } from "../../src/text/tokens";
import { freshDatabase, seededRandom } from "../helpers";

const url = await freshDatabase();
const sql = new SQL({ url, max: 1 });
afterAll(() => sql.close());

/** The schema step that adds the squares. */
const step = migrations.findIndex((m) => m.includes("ADD COLUMN total_sq"));

test("the schema step fills search_stats' squares from the postings as the writes keep them; searches score the same", async () => {
  expect(step).toBeGreaterThan(0);
  const storage = await openPostgres({
    url,
    pool: 2,
    connectTimeoutMs: 5000,
    statementTimeoutMs: 10000,
    keywordLists: false,
  });
  try {
    const rand = seededRandom(36);
    const words = "tea coffee piano paris berlin sails boat red blue dog cat runs daily vegan".split(" ");
    const ops: MemoryOp[] = Array.from({ length: 120 }, (_, i) => ({
      event: "ADD",
      create: {
        id: Bun.randomUUIDv7(),
        namespace: i % 5 === 0 ? "other" : "up",
        entity: `e${i % 3}`,
        // Short notes beside long ones: the spread matters.
        content: Array.from(
          { length: i % 4 === 0 ? 40 + Math.floor(rand() * 60) : 2 + Math.floor(rand() * 6) },
          () => words[Math.floor(rand() * words.length)],
        ).join(" "),
        category: "general",
        importance: 0.5,
      },
    }));
    await storage.apply(ops, null, Date.now());
    // A delete and an edit, so the sums were kept through removals too.
    const [gone, edited] = ops.flatMap((o) => (o.event === "ADD" && o.create.namespace === "up" ? [o.create.id] : []));
    await storage.apply([{ event: "DELETE", target: gone, reason: "test" }], null);
    await storage.apply([{ event: "UPDATE", target: edited, patch: { content: "tea" } }], null);

    const stats = async () =>
      (await sql`SELECT namespace, entity, docs, total_len, total_sq FROM search_stats ORDER BY namespace, entity`).map(
        (r: Record<string, unknown>) => [
          r.namespace,
          r.entity,
          Number(r.docs),
          Number(r.total_len),
          Number(r.total_sq),
        ],
      );
    const scores = async () => {
      const out: string[][] = [];
      for (const scope of [{ namespace: "up" }, { namespace: "up", entity: "e1" }])
        for (const q of ["tea", "piano red dog"])
          out.push(
            (await storage.keywordSearch(scope, queryTerms(q), {}, 50, undefined, NEIGHBOUR_SHARE)).map(
              (h) => `${h.memory.id} ${h.score.toFixed(9)}`,
            ),
          );
      return out;
    };
    const kept = await stats();
    expect(kept.length).toBe(8); // two namespaces, each with its row ('') and three entities
    expect(kept.every((r: unknown[]) => (r[4] as number) > 0)).toBe(true);
    const scored = await scores();

    // The database as the release before left it: no squares.
    await sql`ALTER TABLE search_stats DROP COLUMN total_sq`;
    await sql.unsafe(migrations[step]);
    expect(await stats()).toEqual(kept);
    expect(await scores()).toEqual(scored);
  } finally {
    await storage.close();
  }
}, 60_000);
