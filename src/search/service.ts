// Search over current memories: keyword (BM25, from the storage's index), semantic (exact
// cosine over stored vectors) and hybrid (the two fused by how far their hits stand out: fusion.ts).

import { readAsOf } from "../audit/service";
import type { Core } from "../core";
import { type EmbedCost, EmbedError, embedSettings, embedTexts } from "../embedding/client";
import { requireEntityForAsOf, toMemory } from "../memory/service";
import { isCurrent, type MemoryRecord } from "../storage/records";
import type { AsOfReads, EventReads, MemoryScope, Scored, Search, SearchFilter } from "../storage/storage";
import { indexTerms, queryTerms } from "../text/tokens";
import { ApiError, invalidField } from "../wire/errors";
import { instantField } from "../wire/time";
import { keywordAsOf, keywordAsOfTexts } from "./asof";
import { FUSION, fuse } from "./fusion";
import type { SearchMode, SearchRequest, SearchResponse } from "./model";
import { embedQueryWithShare } from "./probe";

/** What search reads: the ranked reads, and the as-of reads for `asOf` (and its newest event, readAsOf). */
type SearchCore = Core<Search & AsOfReads & Pick<EventReads, "newestEvents">>;

/** The mode a request gets: its own, or hybrid when a model is configured, else keyword. */
export function resolveMode(core: Omit<Core, "storage">, mode: SearchMode | undefined): SearchMode {
  const configured = embedSettings(core.config) !== undefined;
  if (mode === undefined) return configured ? "hybrid" : "keyword";
  if (mode !== "keyword" && !configured)
    throw invalidField(
      "mode",
      `${mode} search needs an embedding model: set MEMD_EMBED_BASE_URL (--embed-base-url) and MEMD_EMBED_MODEL`,
    );
  return mode;
}

export interface RankOptions {
  scope: MemoryScope;
  query: string;
  mode: SearchMode;
  limit: number;
  filter?: SearchFilter;
  cost: EmbedCost;
}

/**
 * The best current memories for a query, best first, and the mode used. Hybrid falls back to
 * keyword (and says so) when the embedding call fails; semantic answers 503 then.
 */
export async function rank(core: SearchCore, o: RankOptions): Promise<{ hits: Scored[]; mode: SearchMode }> {
  const filter = o.filter ?? {};
  const now = Date.now();
  const terms = queryTerms(o.query);
  const keyword = (limit: number) => core.storage.keywordSearch(o.scope, terms, filter, limit, now);
  if (o.mode === "keyword") return { hits: await keyword(o.limit), mode: "keyword" };
  const settings = embedSettings(core.config)!;
  let vector: Float32Array;
  let share = 0;
  try {
    // Hybrid needs the model's probe share too (probe.ts): measured in the same call the first time.
    if (o.mode === "hybrid") ({ vector, share } = await embedQueryWithShare(core, settings, o.query, o.cost));
    else [vector] = await embedTexts(settings, [o.query], o.cost, core.shutdown);
  } catch (e) {
    if (!(e instanceof EmbedError)) throw e;
    if (o.mode === "semantic")
      throw new ApiError("embedding_unavailable", `semantic search is unavailable: ${e.message}`);
    core.logger.warn("embedding failed; answering with keyword search", { error: e.message });
    return { hits: await keyword(o.limit), mode: "keyword" };
  }
  if (o.mode === "semantic")
    return { hits: await core.storage.semanticSearch(o.scope, vector, filter, o.limit, now), mode: "semantic" };
  // Each list is read deeper than `limit` (fusion.ts), so that a hit ranked lower in both can win.
  const depth = Math.max(o.limit, FUSION.depth);
  const [k, s] = await Promise.all([
    keyword(depth),
    core.storage.semanticSearch(o.scope, vector, filter, Math.max(depth, FUSION.semanticStatsDepth), now),
  ]);
  // Only a keyword hit that shares a word of the query other than its stop words may be gated.
  const words = new Set(terms.filter((t) => t.weight === 1).map((t) => t.term));
  const sharesContentWord = (m: MemoryRecord) => indexTerms(m.content).some((t) => words.has(t));
  return { hits: fuse(k, s, o.limit, { share, sharesContentWord }), mode: "hybrid" };
}

/** The longest query, in characters (code points). */
export const maxQueryChars = 1000;

/** POST /v1/memory/search: never a memory that is not current at the time of the answer. */
export async function search(core: SearchCore, req: SearchRequest, cost: EmbedCost): Promise<SearchResponse> {
  if (req.query.length > maxQueryChars && [...req.query].length > maxQueryChars)
    throw invalidField("query", `must be a string of 1 to ${maxQueryChars} characters, not blank`);
  const filter: SearchFilter = {
    category: req.category,
    tags: req.tags,
    observedAfter: instantField("observedAfter", req.observedAfter),
    observedBefore: instantField("observedBefore", req.observedBefore),
    entityPrefix: req.entityPrefix,
  };
  const asOf = await readAsOf(core.storage, req.namespace, req.asOf);
  if (asOf !== undefined) return searchAsOf(core, req, filter, asOf);
  const mode = resolveMode(core, req.mode);
  const { hits, mode: used } = await rank(core, {
    scope: { namespace: req.namespace, entity: req.entity },
    query: req.query,
    mode,
    limit: req.limit ?? 10,
    filter,
    cost,
  });
  const now = Date.now();
  const results = hits.filter((h) => isCurrent(h.memory, now)).map((h) => ({ ...toMemory(h.memory), score: h.score }));
  return { results, mode: used };
}

/**
 * Search as of a moment: keyword only (embeddings are kept for current content only, so older
 * versions have none) and within one entity (the replay is per entity); both say so in a 400.
 */
async function searchAsOf(
  core: SearchCore,
  req: SearchRequest,
  filter: SearchFilter,
  asOf: number,
): Promise<SearchResponse> {
  if (req.mode !== undefined && req.mode !== "keyword")
    throw invalidField(
      "mode",
      `${req.mode} search cannot answer as of a moment: embeddings are kept for current content only; use mode keyword (docs/time.md)`,
    );
  requireEntityForAsOf(req.entity, "a search");
  const scope = { namespace: req.namespace, entity: req.entity!, asOf };
  const terms = queryTerms(req.query);
  const limit = req.limit ?? 10;
  // Two phases where the backend can (score the texts, then read the records of the best only).
  const hits = core.storage.entityTextsAsOf
    ? await keywordAsOfTexts(await core.storage.entityTextsAsOf(scope), terms, filter, limit)
    : keywordAsOf((await core.storage.entityAsOf(scope)).memories, terms, filter, limit);
  return { results: hits.map((h) => ({ ...toMemory(h.memory), score: h.score })), mode: "keyword" };
}

/**
 * The current memories of an entity most related to `content`, for the smart store to offer the
 * model: hybrid search when an embedding model is configured, else keyword. At most `max`.
 */
export async function relatedMemories(
  core: SearchCore,
  namespace: string,
  entity: string,
  content: string,
  max: number,
  cost: EmbedCost,
): Promise<MemoryRecord[]> {
  const mode = embedSettings(core.config) ? "hybrid" : "keyword";
  const { hits } = await rank(core, {
    scope: { namespace, entity },
    query: content.slice(0, 4000),
    mode,
    limit: max,
    cost,
  });
  // Over the whole entity (the caller reads at most its 2000 oldest memories for duplicates).
  const now = Date.now();
  return hits.map((h) => h.memory).filter((m) => isCurrent(m, now));
}
