// Search over current memories: keyword (BM25, from the storage's index), semantic (exact
// cosine over stored vectors) and hybrid (the two fused by how far their hits stand out: fusion.ts).

import { readAsOf } from "../audit/service";
import type { Core } from "../core";
import { builtinQueryText } from "../embedding/builtin";
import { type EmbedCost, EmbedError, embedSettings, embedTexts } from "../embedding/client";
import { catchUp } from "../embedding/worker";
import { requireEntityForAsOf, toMemory } from "../memory/service";
import { isCurrent, type MemoryRecord } from "../storage/records";
import type {
  AsOfReads,
  Embeddings,
  EventReads,
  MemoryReads,
  MemoryScope,
  Scored,
  Search,
  SearchFilter,
} from "../storage/storage";
import { NEIGHBOUR_SHARE } from "../text/scoring";
import { indexTerms, queryTerms } from "../text/tokens";
import { ApiError, invalidField } from "../wire/errors";
import { instantField } from "../wire/time";
import { keywordAsOf, keywordAsOfTexts } from "./asof";
import { FUSION, fuse } from "./fusion";
import type { SearchMode, SearchRequest, SearchResponse } from "./model";
import { embedQueryWithShare } from "./probe";
import { RERANK_DEPTH, type RerankCost, rerank, rerankSettings } from "./rerank";

/**
 * What search reads: the ranked reads, the memories adjacent to a hit (adjacent.ts), the as-of
 * reads for `asOf` (and its newest event, readAsOf), and the embedding queue (the built-in
 * embedder's backlog is embedded before a search: embedding/worker.ts's catchUp).
 */
type SearchCore = Core<
  Search & AsOfReads & Pick<EventReads, "newestEvents"> & Pick<MemoryReads, "adjacentMemories"> & Embeddings
>;

/**
 * The mode a request gets: its own, or hybrid when there is an embedder (the built-in one unless
 * switched off, or a configured endpoint), else keyword.
 */
export function resolveMode(core: Omit<Core, "storage">, mode: SearchMode | undefined): SearchMode {
  const configured = embedSettings(core.config) !== undefined;
  if (mode === undefined) return configured ? "hybrid" : "keyword";
  if (mode !== "keyword" && !configured)
    throw invalidField(
      "mode",
      `${mode} search needs an embedder: the built-in one is off (--embedder none); drop MEMD_EMBEDDER=none, or set MEMD_EMBED_BASE_URL (--embed-base-url) and MEMD_EMBED_MODEL`,
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
  /**
   * Only hits that are evidence (for the context block): in hybrid mode, keyword's hits when one
   * of them shares a word of the query other than its stop words, and semantic hits standing at least
   * RELEVANT_SEMANTIC_Z standard deviations above their list's mean. Only with the built-in
   * embedder (a configured endpoint's answers stay as they were); keyword mode is unchanged.
   */
  relevantOnly?: boolean;
  /**
   * Reorders keyword's list (BM25 scores) before it is returned or fused: the context block's
   * named speakers (context/speakers.ts).
   */
  reorderKeyword?: (hits: Scored[]) => Scored[];
  /** In hybrid mode, how many of keyword's first hits keep their places (fusion.ts keywordKept). */
  keywordKept?: number;
}

/** How far above its list's mean a semantic hit must stand to be evidence (RankOptions.relevantOnly). */
export const RELEVANT_SEMANTIC_Z = 1;

/**
 * The probe share (probe.ts) the built-in embedder's semantic list is weighed by in hybrid
 * search. It is not probed: the probes tell a model that knows meaning from a lexical one, and a
 * static table, however distilled, fails them by construction (a paraphrase shares no token with
 * its anchor, the distractor shares several), though its neighbours are the teacher's. Measured
 * instead on LoCoMo's dev half, evidence in the top 5 / top 10, with BUILTIN_KEYWORD_HEAD: share
 * 0.5, turns 0.678/0.792, observations 0.640/0.700; share 1, 0.678/0.786 and 0.640/0.704 (keyword
 * 0.678/0.783 and 0.640/0.689).
 */
export const BUILTIN_SHARE = { value: 0.5 };

/**
 * Keyword hits that keep their places ahead of the built-in embedder's (fusion.ts keywordHead):
 * the first five, so that hybrid's hit@5 is keyword's, and the semantic list reorders the rest.
 */
export const BUILTIN_KEYWORD_HEAD = 5;

/**
 * The best current memories for a query, best first, and the mode used. Hybrid falls back to
 * keyword (and says so) when the embedding call fails; semantic answers 503 then.
 */
export async function rank(core: SearchCore, o: RankOptions): Promise<{ hits: Scored[]; mode: SearchMode }> {
  const filter = o.filter ?? {};
  const now = Date.now();
  const terms = queryTerms(o.query);
  // Adjacent hits lend a share of their scores (text/scoring.ts NEIGHBOUR_SHARE).
  const keyword = async (limit: number) => {
    const hits = await core.storage.keywordSearch(o.scope, terms, filter, limit, now, NEIGHBOUR_SHARE);
    return o.reorderKeyword ? o.reorderKeyword(hits) : hits;
  };
  if (o.mode === "keyword") return { hits: await keyword(o.limit), mode: "keyword" };
  const settings = embedSettings(core.config)!;
  if (settings.builtin) await catchUp(core);
  let vector: Float32Array;
  let share = 0;
  try {
    // Hybrid needs the model's probe share too (probe.ts): measured in the same call the first time.
    if (o.mode === "hybrid" && !settings.builtin)
      ({ vector, share } = await embedQueryWithShare(core, settings, o.query, o.cost));
    else
      [vector] = await embedTexts(
        settings,
        [settings.builtin ? builtinQueryText(o.query) : o.query],
        o.cost,
        core.shutdown,
      );
    if (settings.builtin) share = BUILTIN_SHARE.value;
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
  const hits = fuse(k, s, o.limit, {
    share,
    sharesContentWord,
    keywordHead: settings.builtin ? BUILTIN_KEYWORD_HEAD : 0,
    keywordKept: o.keywordKept,
  });
  if (!o.relevantOnly || !settings.builtin) return { hits, mode: "hybrid" };
  // Keyword's hits are evidence as they are in a keyword-mode block, the one sharing only stop
  // words with the query too (the turn after a strong hit, "What did you take away from it?"),
  // unless none shares more: then the list is no evidence (as in fuse).
  const evidence = new Set(k.some((h) => sharesContentWord(h.memory)) ? k.map((h) => h.memory.id) : []);
  const stats = s.slice(0, FUSION.semanticStatsDepth);
  const mean = stats.reduce((a, h) => a + h.score, 0) / (stats.length || 1);
  const sd = Math.sqrt(stats.reduce((a, h) => a + (h.score - mean) ** 2, 0) / (stats.length || 1));
  for (const h of s) if (sd > 0 && (h.score - mean) / sd >= RELEVANT_SEMANTIC_Z) evidence.add(h.memory.id);
  return { hits: hits.filter((h) => evidence.has(h.memory.id)), mode: "hybrid" };
}

/** The longest query, in characters (code points). */
export const maxQueryChars = 1000;

/** POST /v1/memory/search: never a memory that is not current at the time of the answer. */
export async function search(
  core: SearchCore,
  req: SearchRequest,
  cost: EmbedCost,
  rerankCost?: RerankCost,
): Promise<SearchResponse> {
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
  const limit = req.limit ?? 10;
  const reranking = rerankSettings(core.config) !== undefined;
  const { hits: found, mode: used } = await rank(core, {
    scope: { namespace: req.namespace, entity: req.entity },
    query: req.query,
    mode,
    limit: reranking ? Math.max(limit, RERANK_DEPTH) : limit,
    filter,
    cost,
  });
  // With a reranker, the best RERANK_DEPTH are reordered by it (rerank.ts).
  const hits = reranking
    ? (await rerank(core, req.query, found, Math.max(limit, RERANK_DEPTH), rerankCost)).slice(0, limit)
    : found;
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
 * model: hybrid search when there is an embedder, else keyword. At most `max`.
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
