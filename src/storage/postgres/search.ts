// The PostgreSQL search index: postings, stats, vectors and the embedding queue as plain rows,
// written by apply inside its transaction; BM25 computed in one SQL statement.
import type { ReservedSQL, SQL, TransactionSQL } from "bun";
import { type KeywordSpace, keywordSearch as spaceSearch } from "../../index/keyword";
import { ann, exactReads, topIndexes, type VectorSpace } from "../../index/vector";
import { bm25Sql, lengthNormBSql, type QueryTerm } from "../../text/scoring";
import { termCounts } from "../../text/tokens";
import { byScoreThenNewer, matchesFilter, normalized } from "../ops";
import { isCurrent, type MemoryRecord } from "../records";
import type { MemoryScope, Scored, Search, SearchFilter, VectorUpdate } from "../storage";
import { memoryOf } from "./rows";
import type { PgState } from "./state";
import { pgVectors, type UnfollowedCopy } from "./vector-cache";

type Tx = TransactionSQL | SQL | ReservedSQL;

/** A memory's indexed state before and after one apply, and the last vector update it got. */
export interface IndexTouch {
  before: MemoryRecord | undefined;
  after: MemoryRecord;
  vector: VectorUpdate | undefined;
  /** Only the vector changes (the embedding worker): postings and stats stay. */
  vectorOnly?: boolean;
}

const vectorBytes = (v: Float32Array | number[]) => Buffer.from(normalized(v).buffer);

/**
 * Writes the net index change of one apply: postings, stats, vectors, queue. `stamps` (the
 * embedding worker's) gives each namespace's new vectors a stamp from its clock, for replicas'
 * in-memory copies to follow (vector-cache.ts).
 */
export async function writeIndex(
  tx: Tx,
  touched: Iterable<IndexTouch>,
  stamps?: ReadonlyMap<string, number>,
): Promise<void> {
  const change = indexChange(touched);
  if (stamps) for (const v of change.vectors) v.stamp = stamps.get(v.namespace);
  const deletes = sendIndexDeletes(tx, change);
  const writes = new Statement();
  addIndexWrites(writes, change);
  await Promise.all([...deletes, ...(writes.empty ? [] : [writes.send(tx)])]);
}

/** The rows of an index change, as computed from what one apply did. */
export interface IndexChange {
  /** Memories whose postings go. */
  removeIds: string[];
  postings: { namespace: string; entity: string; term: string; memory_id: string; tf: number; doc_len: number }[];
  stats: { namespace: string; entity: string; docs: number; total_len: number; total_sq: number }[];
  /** Memories whose vector and queue entry go. */
  dropIds: string[];
  /** New vectors: float32 little-endian, base64 (rows travel as JSON). */
  vectors: { memory_id: string; namespace: string; entity: string; vector: string; stamp?: number }[];
  pending: { memory_id: string }[];
}

/** The net index change of one apply: postings, stats, vectors, queue; a new memory has nothing to delete. */
export function indexChange(touched: Iterable<IndexTouch>): IndexChange {
  const removeIds: string[] = [];
  const postings: IndexChange["postings"] = [];
  const stats = new Map<string, IndexChange["stats"][number]>();
  /** `docs` (1 or -1) memories of length `len` added to the scope's stats. */
  const bump = (namespace: string, entity: string, docs: number, len: number) => {
    const k = JSON.stringify([namespace, entity]);
    const s = stats.get(k) ?? { namespace, entity, docs: 0, total_len: 0, total_sq: 0 };
    s.docs += docs;
    s.total_len += docs * len;
    s.total_sq += docs * len * len;
    stats.set(k, s);
  };
  const dropIds = new Set<string>();
  const pending: IndexChange["pending"] = [];
  const vectors: IndexChange["vectors"] = [];
  for (const { before, after, vector, vectorOnly } of touched) {
    const was = before?.state === "current";
    const is = after.state === "current";
    const changed = !was || !is || before!.content !== after.content;
    if (!changed && !vectorOnly) continue;
    if (changed && was) {
      const { length } = termCounts(before!.content);
      removeIds.push(before!.id);
      bump(before!.namespace, "", -1, length);
      bump(before!.namespace, before!.entity, -1, length);
    }
    if (changed && is) {
      const { tf, length } = termCounts(after.content);
      for (const [term, n] of tf)
        postings.push({
          namespace: after.namespace,
          entity: after.entity,
          term,
          memory_id: after.id,
          tf: n,
          doc_len: length,
        });
      bump(after.namespace, "", 1, length);
      bump(after.namespace, after.entity, 1, length);
    }
    // A memory that did not exist before has no vector or queue entry to drop (and a rebuild
    // keeps the stored ones).
    if (before !== undefined && (!is || (was && vector === undefined) || vector !== undefined)) dropIds.add(after.id);
    if (is && vector === "pending") pending.push({ memory_id: after.id });
    if (is && vector !== undefined && vector !== "pending")
      vectors.push({
        memory_id: after.id,
        namespace: after.namespace,
        entity: after.entity,
        vector: vectorBytes(vector).toString("base64"),
      });
  }
  const rows = [...stats.values()]
    .filter((s) => s.docs !== 0 || s.total_len !== 0 || s.total_sq !== 0)
    .sort((a, b) => (a.namespace + a.entity < b.namespace + b.entity ? -1 : 1));
  return { removeIds, postings, stats: rows, dropIds: [...dropIds], vectors, pending };
}

const started = <T>(q: Promise<T> & { execute(): unknown }) => q.execute() as Promise<T>;

/**
 * Sends an index change's deletes on `tx`, without waiting: they go before the statement that
 * writes the new rows (one statement cannot delete and insert the same key).
 */
export function sendIndexDeletes(tx: Tx, c: IndexChange): Promise<unknown>[] {
  const out: Promise<unknown>[] = [];
  const text = (xs: string[]) => tx.array(xs, "text");
  // Ids as one array parameter: an erasure can touch 100,000 memories.
  if (c.removeIds.length)
    out.push(started(tx`DELETE FROM memory_terms WHERE memory_id = ANY(${text(c.removeIds)}::uuid[])`));
  if (c.dropIds.length) {
    out.push(started(tx`DELETE FROM memory_vectors WHERE memory_id = ANY(${text(c.dropIds)}::uuid[])`));
    out.push(started(tx`DELETE FROM embed_pending WHERE memory_id = ANY(${text(c.dropIds)}::uuid[])`));
  }
  return out;
}

/**
 * One statement of several writes, each a data-modifying WITH query over rows given as one JSON
 * text (json_populate_recordset): one statement and one parameter per table, whatever the number
 * of rows, encoded by JSON.stringify. PostgreSQL runs every such query to completion. The rows
 * of one statement must not meet twice (no key inserted twice, nothing deleted and inserted).
 */
export class Statement {
  private readonly parts: string[] = [];
  private readonly params: string[] = [];
  get empty() {
    return this.parts.length === 0;
  }
  /** Adds a write; `$rows` in `sql` stands for the rows, as json. */
  add(sql: string, rows: unknown[]) {
    if (rows.length === 0) return;
    this.params.push(JSON.stringify(rows));
    this.parts.push(`w${this.parts.length} AS (${sql.replaceAll("$rows", `$${this.params.length}::text::json`)})`);
  }
  /** Sends it on `tx`, without waiting. */
  send(tx: Tx): Promise<unknown> {
    return started(tx.unsafe(`WITH ${this.parts.join(",\n")} SELECT 1`, this.params));
  }
}

/** Adds an index change's new rows to `w`: postings, stats, vectors, queue. */
export function addIndexWrites(w: Statement, c: IndexChange) {
  w.add(
    `INSERT INTO memory_terms (namespace, entity, term, memory_id, tf, doc_len)
     SELECT namespace, entity, term, memory_id, tf, doc_len FROM json_populate_recordset(NULL::memory_terms, $rows)`,
    c.postings,
  );
  w.add(
    `INSERT INTO search_stats AS s (namespace, entity, docs, total_len, total_sq)
     SELECT namespace, entity, docs, total_len, total_sq FROM json_populate_recordset(NULL::search_stats, $rows)
     ON CONFLICT (namespace, entity) DO UPDATE
       SET docs = s.docs + EXCLUDED.docs, total_len = s.total_len + EXCLUDED.total_len,
           total_sq = s.total_sq + EXCLUDED.total_sq`,
    c.stats,
  );
  w.add(
    `INSERT INTO memory_vectors (memory_id, namespace, entity, vector, stamp)
     SELECT memory_id, namespace, entity, decode(vector, 'base64'), stamp
     FROM json_to_recordset($rows) AS t(memory_id uuid, namespace text, entity text, vector text, stamp bigint)`,
    c.vectors,
  );
  w.add(
    `INSERT INTO embed_pending (memory_id) SELECT memory_id FROM json_to_recordset($rows) AS t(memory_id uuid)`,
    c.pending,
  );
}

/** Filter conditions on memories `m`, as SQL text with $n parameters appended to `params`. */
function filterSql(filter: SearchFilter, now: number, params: unknown[]): string {
  params.push(now);
  let where = `m.state = 'current' AND (m.expires_at IS NULL OR m.expires_at > $${params.length})`;
  if (filter.category !== undefined) {
    params.push(filter.category);
    where += ` AND m.category = $${params.length}`;
  }
  if (filter.categories !== undefined) {
    params.push(`{${filter.categories.map(pgArrayItem).join(",")}}`);
    where += ` AND m.category = ANY($${params.length}::text[])`;
  }
  if (filter.tags?.length) {
    // Tags are stored as a JSON string holding the array (see memoryRow), hence #>> to unwrap it;
    // the parameter goes as text, or the driver would wrap it in a JSON string too.
    params.push(JSON.stringify(filter.tags));
    where += ` AND m.tags IS NOT NULL AND (m.tags #>> '{}')::jsonb @> $${params.length}::text::jsonb`;
  }
  // Observed time: older rows have none, and count as observed when they were created.
  if (filter.observedAfter !== undefined) {
    params.push(filter.observedAfter);
    where += ` AND COALESCE(m.observed_at, m.created_at) >= $${params.length}`;
  }
  if (filter.observedBefore !== undefined) {
    params.push(filter.observedBefore);
    where += ` AND COALESCE(m.observed_at, m.created_at) < $${params.length}`;
  }
  if (filter.entityPrefix !== undefined) {
    params.push(filter.entityPrefix);
    where += ` AND starts_with(m.entity, $${params.length}::text)`;
  }
  return where;
}

/**
 * BM25 (text/scoring.ts: k1, the scope's b, the terms' weights) over the scope's postings, in one
 * statement; best first, ties newer first. The postings of the query's terms are read once (df by
 * a window over them). Within an entity, with `share` > 0, each candidate gains that share of the
 * better score of the entity's current memories just before and after it in id order, when they
 * are candidates too (adjacent hits, as src/index/keyword/search.ts). Only the best `pool` scores
 * (with every tie at the cut) are joined to their memories and filtered; when fewer than `limit`
 * of those pass the filter, the statement runs again over all of them.
 */
export async function keywordSearch(
  sql: SQL,
  scope: MemoryScope,
  terms: readonly QueryTerm[],
  filter: SearchFilter,
  limit: number,
  now: number,
  memoryOf: (r: Record<string, unknown>) => MemoryRecord,
  share = 0,
): Promise<Scored[]> {
  if (terms.length === 0) return [];
  const weights = new Map<string, number>();
  for (const t of terms) weights.set(t.term, Math.max(weights.get(t.term) ?? 0, t.weight));
  const run = async (pool: number | null) => {
    const params: unknown[] = [
      scope.namespace,
      scope.entity ?? "",
      `{${[...weights.keys()].map(pgArrayItem).join(",")}}`,
      pool,
      `{${[...weights.values()].join(",")}}`,
      share,
    ];
    const byEntity = scope.entity !== undefined ? "AND t.entity = $2" : "";
    // The entity's current memories in id order (memories_current_by_entity), each with its own
    // score when it is a candidate: a candidate's neighbours are the rows before and after it.
    // Merged by grouping, not joined: a join of the candidates (whose number the planner cannot
    // know) with memories was planned row by row on a table without statistics: minutes for 20,000.
    const adjacent =
      scope.entity !== undefined && share > 0
        ? `SELECT memory_id, score + $6::float8 * greatest(COALESCE(before, 0), COALESCE(after, 0)) AS score
           FROM (SELECT memory_id, score, lag(score) OVER w AS before, lead(score) OVER w AS after
                 FROM (SELECT memory_id, max(score) AS score
                       FROM (SELECT n.id AS memory_id, NULL::float8 AS score FROM memories n
                             WHERE n.namespace = $1 AND n.entity = $2 AND n.state = 'current'
                             UNION ALL SELECT memory_id, score FROM own0) u
                       GROUP BY memory_id) e
                 WINDOW w AS (ORDER BY memory_id)) s
           WHERE score IS NOT NULL`
        : "SELECT * FROM own0";
    const where = filterSql(filter, now, params);
    params.push(limit);
    return sql.unsafe(
      `WITH st0 AS (SELECT docs::float8 AS docs, total_len::float8 / docs AS avg, total_sq::float8 AS squares
                    FROM search_stats WHERE namespace = $1 AND entity = $2 AND docs > 0),
            st AS (SELECT docs, avg, ${lengthNormBSql("st0")} AS b FROM st0),
            q AS (SELECT * FROM unnest($3::text[], $5::float8[]) AS q(term, weight)),
            p AS (SELECT t.memory_id, t.tf, t.doc_len, q.weight, count(*) OVER (PARTITION BY t.term)::float8 AS df
                  FROM memory_terms t JOIN q ON q.term = t.term
                  WHERE t.namespace = $1 ${byEntity} AND t.term = ANY($3::text[])),
            own0 AS (SELECT p.memory_id, ${bm25Sql("p", "st")} AS score
                     FROM p CROSS JOIN st GROUP BY p.memory_id),
            sc AS (${adjacent}),
            top AS (SELECT * FROM sc WHERE $4::int IS NULL OR sc.score >= COALESCE(
                      (SELECT score FROM sc ORDER BY score DESC OFFSET $4::int - 1 LIMIT 1), '-Infinity'::float8))
       SELECT m.*, top.score FROM top JOIN memories m ON m.id = top.memory_id
       WHERE ${where}
       ORDER BY top.score DESC, m.created_at DESC, m.id DESC LIMIT $${params.length}`,
      params,
    );
  };
  let rows = await run(limit * 4 + 16);
  if (rows.length < limit) rows = await run(null);
  return rows.map((r: Record<string, unknown>) => ({ memory: memoryOf(r), score: Number(r.score) }));
}

/** A text[] literal item, quoted. */
const pgArrayItem = (s: string) => `"${s.replace(/\\/g, "\\\\").replace(/"/g, '\\"')}"`;

/** A stored vector's (float32 little-endian bytes) dot product with `q`; undefined if its dimension differs. */
function dotWith(bytes: Uint8Array, q: Float32Array): number | undefined {
  if (bytes.length !== q.length * 4) return undefined;
  const v = new Float32Array(new Uint8Array(bytes).buffer);
  let dot = 0;
  for (let j = 0; j < v.length; j++) dot += v[j] * q[j];
  return dot;
}

/** Exact cosine over the scope's vectors, scored in JS; then the best current ones passing the filter. */
export async function semanticSearch(
  sql: SQL,
  scope: MemoryScope,
  query: Float32Array,
  filter: SearchFilter,
  limit: number,
  now: number,
  memoryOf: (r: Record<string, unknown>) => MemoryRecord,
): Promise<Scored[]> {
  const q = normalized(query);
  const rows =
    scope.entity === undefined
      ? await sql`SELECT memory_id, vector FROM memory_vectors WHERE namespace = ${scope.namespace}`
      : await sql`SELECT memory_id, vector FROM memory_vectors WHERE namespace = ${scope.namespace} AND entity = ${scope.entity}`;
  const scored: { id: string; score: number }[] = [];
  for (const r of rows) {
    const score = dotWith(r.vector as Uint8Array, q);
    if (score !== undefined) scored.push({ id: r.memory_id as string, score });
  }
  // Equal scores newest first (ids are UUIDv7), as the answer orders them: so the chunks below are
  // read in the answer's order and the first `limit` that pass the filters are the answer.
  scored.sort((a, b) => b.score - a.score || (a.id < b.id ? 1 : a.id > b.id ? -1 : 0));
  const out: Scored[] = [];
  for (let from = 0; from < scored.length && out.length < limit; ) {
    const chunk = scored.slice(from, from + limit * 4 + 16);
    from += chunk.length;
    const params: unknown[] = [`{${chunk.map((c) => c.id).join(",")}}`];
    const where = filterSql(filter, now, params);
    const found = await sql.unsafe(`SELECT m.* FROM memories m WHERE m.id = ANY($1::uuid[]) AND ${where}`, params);
    const byId = new Map<string, MemoryRecord>(
      found.map((r: Record<string, unknown>) => [r.id as string, memoryOf(r)]),
    );
    for (const c of chunk) {
      const m = byId.get(c.id);
      if (m) out.push({ memory: m, score: c.score });
    }
  }
  return out.sort(byScoreThenNewer).slice(0, limit);
}

/**
 * Cosine top-k from the namespace's in-memory copy (vector-cache.ts): the scope's nearest codes,
 * ranked again by their 4-bit vectors; the best of those are read with their memory rows
 * (current, in the scope, passing the filter) and exact vectors, and scored exactly, so every
 * score answered is the exact cosine. When fewer than `limit` pass, more are read, up to the
 * whole scope.
 * With `unfollowed` (a copy not caught up before this search: PgVectorCache.current), the first
 * statement also reads the namespace's clock and the vectors' epoch, and the answer is undefined
 * unless the copy held every change up to that clock, under that epoch, and took none while the
 * search ran: then it was as up to date as following it first would have made it (that statement
 * began after the search was asked for), and the answer is the same.
 */
export async function approximateSearch(
  sql: SQL,
  space: VectorSpace,
  scope: MemoryScope,
  query: Float32Array,
  filter: SearchFilter,
  limit: number,
  now: number,
  memoryOf: (r: Record<string, unknown>) => MemoryRecord,
  unfollowed?: UnfollowedCopy,
): Promise<Scored[] | undefined> {
  const q = normalized(query);
  const read = new Set<string>();
  const out: Scored[] = [];
  const first = exactReads(limit);
  // (Taken in the same turn as the first ranking below.)
  const at = unfollowed && { upto: unfollowed.upto(), applied: unfollowed.applied() };
  let check = at !== undefined;
  for (let want = Math.max(first, ann.rescore); ; want *= 4) {
    const { ids, sims, all } = space.nearest(scope.entity, q, want);
    // The candidates best first (equal ones in their order): the first `first` picked from the
    // rest (a search rarely reads more), the whole order sorted only when it does.
    const byScore = (a: number, b: number) => sims[b] - sims[a] || a - b;
    let order = topIndexes(sims, first).sort(byScore).slice(0, first);
    for (let from = 0, to = first; from < ids.length; from = to, to *= 4) {
      if (from === order.length) order = Array.from(ids.keys()).sort(byScore);
      const batch = order
        .slice(from, to)
        .map((i) => ids[i])
        .filter((id) => !read.has(id));
      if (batch.length === 0) continue;
      for (const id of batch) read.add(id);
      // In a few statements at once: rows not in the database's memory are read from disk one
      // after another within a statement, so statements side by side overlap those reads.
      const parts = Math.min(pgVectors.readParallel, Math.ceil(batch.length / 8));
      const size = Math.ceil(batch.length / parts);
      const rowsOf = (ids: string[]) => {
        const params: unknown[] = [`{${ids.join(",")}}`, scope.namespace];
        let where = "m.namespace = $2";
        if (scope.entity !== undefined) {
          params.push(scope.entity);
          where += ` AND m.entity = $${params.length}`;
        }
        where += ` AND ${filterSql(filter, now, params)}`;
        // From the ids, each memory and vector by its primary key (whatever the statistics say).
        const found = `SELECT m.*, v.vector FROM unnest($1::uuid[]) AS c(id)
           JOIN memories m ON m.id = c.id JOIN memory_vectors v ON v.memory_id = c.id WHERE ${where}`;
        if (!withClock) return sql.unsafe(found, params);
        withClock = false;
        // (One row at least, whatever passes: the clock's.)
        return sql.unsafe(
          `SELECT (SELECT last_ms FROM namespace_clock WHERE namespace = $2) AS clock_ms,
                  (SELECT vector_epoch FROM search_state WHERE id = 1) AS vector_epoch_now, f.*
           FROM (SELECT 1) AS one LEFT JOIN (${found}) AS f ON true`,
          params,
        );
      };
      let withClock = check;
      const chunks = Array.from({ length: parts }, (_, k) => batch.slice(k * size, (k + 1) * size)).filter(
        (c) => c.length > 0,
      );
      const rows = (await Promise.all(chunks.map(rowsOf))).flat();
      if (check && at && unfollowed) {
        check = false;
        const head = rows.find((r) => "clock_ms" in r);
        const clock = Number(head?.clock_ms ?? 0);
        const fresh =
          head !== undefined &&
          clock <= at.upto &&
          Number(head.vector_epoch_now) === unfollowed.epoch &&
          unfollowed.applied() === at.applied;
        if (!fresh) return undefined;
      }
      for (const r of rows) {
        if ("clock_ms" in r) {
          delete r.clock_ms;
          delete r.vector_epoch_now;
          if (r.id === null) continue;
        }
        const score = dotWith(r.vector as Uint8Array, q);
        delete r.vector;
        if (score !== undefined) out.push({ memory: memoryOf(r), score });
      }
      if (out.length >= limit) return out.sort(byScoreThenNewer).slice(0, limit);
    }
    if (all) return check ? undefined : out.sort(byScoreThenNewer).slice(0, limit);
  }
}

/** Rebuilds postings and stats from the current memories, in the caller's transaction. */
export async function rebuildIndex(
  tx: Tx,
  embeddings: boolean,
  memoryOf: (r: Record<string, unknown>) => MemoryRecord,
) {
  await tx`DELETE FROM memory_terms`;
  await tx`DELETE FROM search_stats`;
  if (embeddings) {
    await tx`DELETE FROM memory_vectors`;
    await tx`DELETE FROM embed_pending`;
    // Every replica's in-memory vectors are dropped (vector-cache.ts), then built again.
    await tx`UPDATE search_state SET vector_epoch = vector_epoch + 1 WHERE id = 1`;
  }
  let n = 0;
  let after = "00000000-0000-0000-0000-000000000000";
  for (;;) {
    const rows = await tx`SELECT * FROM memories WHERE state = 'current' AND id > ${after} ORDER BY id LIMIT 2000`;
    if (rows.length === 0) break;
    const records = rows.map(memoryOf);
    // Keep existing vectors unless embeddings are rebuilt: index as if new, without touching vectors.
    await writeIndex(
      tx,
      records.map((r: MemoryRecord) => ({ before: undefined, after: r, vector: embeddings ? "pending" : undefined })),
    );
    n += records.length;
    after = records.at(-1)!.id;
  }
  return n;
}

/** Rounds of record reads a search on the lists may take before it answers by SQL instead. */
const LIST_ROUNDS = 4;

/**
 * BM25 top-k on this replica's lists (keyword-cache.ts), caught up by the caller. The search
 * (src/index/keyword/) asks whether each candidate is current and passes the filter; a memory
 * whose row is not read yet is taken as passing, and the rows asked for are then read in one
 * statement: when every one passes, that answer is the answer (the same search with those rows
 * known makes the same choices); else the search runs again with them known. After
 * LIST_ROUNDS rounds (a filter few memories pass), undefined: the caller answers by SQL.
 */
export async function listSearch(
  sql: SQL,
  space: KeywordSpace,
  scope: MemoryScope,
  terms: readonly QueryTerm[],
  filter: SearchFilter,
  limit: number,
  now: number,
  memoryOf: (r: Record<string, unknown>) => MemoryRecord,
  share = 0,
): Promise<Scored[] | undefined> {
  const known = new Map<string, MemoryRecord | null>();
  for (let round = 0; round < LIST_ROUNDS; round++) {
    const missing: string[] = [];
    const out = spaceSearch(
      space,
      scope,
      terms,
      limit,
      (id) => {
        const k = known.get(id);
        if (k !== undefined) return k;
        missing.push(id);
        return { id } as MemoryRecord;
      },
      share,
    );
    if (missing.length === 0) return out;
    const rows = await sql`SELECT * FROM memories WHERE id = ANY(${sql.array(missing, "text")}::uuid[])`;
    const byId = new Map<string, MemoryRecord>(rows.map((r: Record<string, unknown>) => [r.id as string, memoryOf(r)]));
    let allPass = true;
    for (const id of missing) {
      const m = byId.get(id);
      const ok = isCurrent(m, now) && m.namespace === scope.namespace && matchesFilter(m, filter);
      known.set(id, ok ? m : null);
      if (!ok) allPass = false;
    }
    if (allPass) return out.map((h) => ({ memory: known.get(h.memory.id)!, score: h.score }));
  }
  return undefined;
}

/**
 * The Search role: the statements above, each a read with its deadline. A keyword search uses
 * this replica's lists once they are built (keyword-cache.ts), the SQL statement until then (and
 * without lists). A semantic search uses the namespace's in-memory copy once it is built and the
 * scope holds more than `pgVectors.exactBelow` vectors; otherwise it reads every vector of the scope.
 */
export function pgSearch({ sql, db, read, vectors, keywordLists }: PgState): Search {
  return {
    // The replica's lists rank as the SQL statement does (the scope's b, adjacent hits within an
    // entity), so that an answer does not depend on whether they are built yet.
    async keywordSearch(scope, terms, filter, limit, now = Date.now(), share = 0) {
      if (terms.length > 0 && keywordLists) {
        const found = await db(async () => {
          const space = await keywordLists.get(scope.namespace);
          return space && listSearch(sql, space, scope, terms, filter, limit, now, memoryOf, share);
        });
        if (found) return found;
      }
      return read((sql) => keywordSearch(sql, scope, terms, filter, limit, now, memoryOf, share));
    },

    async semanticSearch(scope, vector, filter, limit, now = Date.now()) {
      // The copy as it is, its freshness checked by the search's first statement (no follow
      // statement before it when nothing changed: issue 32); caught up first when it was not.
      const copy = pgVectors.checkAtRead ? vectors.current(scope.namespace) : undefined;
      if (copy && copy.space.scopeSize(scope.entity) > pgVectors.exactBelow) {
        const found = await read((sql) =>
          approximateSearch(sql, copy.space, scope, vector, filter, limit, now, memoryOf, copy),
        );
        if (found) return found;
      }
      const space = await vectors.ready(scope.namespace);
      if (space && space.scopeSize(scope.entity) > pgVectors.exactBelow)
        return (await read((sql) => approximateSearch(sql, space, scope, vector, filter, limit, now, memoryOf)))!;
      return read((sql) => semanticSearch(sql, scope, vector, filter, limit, now, memoryOf));
    },
  };
}
