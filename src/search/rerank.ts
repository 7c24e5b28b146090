// The optional reranker: a cross-encoder behind the protocol Cohere, Jina, Voyage, vLLM,
// llama.cpp and Hugging Face's TEI share: POST {base}/rerank with {model, query, documents,
// top_n}, answered {results: [{index, relevance_score}]}. Off unless MEMD_RERANK_BASE_URL is set.
// It reorders a search's best hits (search and context); a reranker that fails, times out or
// answers something else is passed over (logged, counted): the search's own order is answered,
// as a hybrid search answers keyword's when the embedder is down.
import type { Config } from "../config/config";
import type { Core } from "../core";
import type { Scored } from "../storage/storage";
import { ApiError } from "../wire/errors";

/** Hits a search hands the reranker: its best this many (or the request's limit, when larger). */
export const RERANK_DEPTH = 30;

export interface RerankSettings {
  baseUrl: string;
  model: string;
  apiKey?: string;
  timeoutMs: number;
}

/** The reranker settings, or undefined when none is configured. */
export function rerankSettings(config: Config): RerankSettings | undefined {
  if (!config.rerankBaseUrl) return undefined;
  return {
    baseUrl: config.rerankBaseUrl.replace(/\/+$/, ""),
    model: config.rerankModel ?? "default",
    apiKey: config.rerankApiKey,
    timeoutMs: config.rerankTimeoutMs,
  };
}

/** Running totals since start, for /metrics (rerankMetrics). */
export const rerankingStats = { calls: 0, errors: 0, documents: 0, latencyMs: 0 };

/** rerankingStats in Prometheus text (the memd_embed_* counters' counterparts). */
export function rerankMetrics(): string {
  const s = rerankingStats;
  const line = (name: string, help: string, v: number) =>
    `# HELP ${name} ${help}\n# TYPE ${name} counter\n${name} ${v}`;
  return [
    line("memd_rerank_calls_total", "Reranker calls made by searches and context blocks.", s.calls),
    line(
      "memd_rerank_call_errors_total",
      "Reranker calls that failed, timed out or answered something else (the search's own order was answered).",
      s.errors,
    ),
    line("memd_rerank_documents_total", "Documents sent to the reranker.", s.documents),
    line("memd_rerank_call_seconds_total", "Time spent waiting for the reranker.", s.latencyMs / 1000),
  ].join("\n");
}

/** What the reranker cost one request, for the x-memd-rerank-calls header. */
export interface RerankCost {
  calls: number;
}

/**
 * Runs a request's work with a fresh RerankCost and reports the reranker calls it made in the
 * answer's x-memd-rerank-calls header (when a reranker is configured), on a refusal (ApiError) as
 * on success: as withEmbedCost does for the embedder.
 */
export async function withRerankCost<T>(
  core: Pick<Core, "config">,
  set: { headers: object },
  run: (cost: RerankCost) => Promise<T>,
): Promise<T> {
  if (!rerankSettings(core.config)) return run({ calls: 0 });
  const cost: RerankCost = { calls: 0 };
  const headers = () => ({ "x-memd-rerank-calls": String(cost.calls) });
  try {
    const res = await run(cost);
    Object.assign(set.headers, headers());
    return res;
  } catch (e) {
    if (e instanceof ApiError) throw new ApiError(e.code, e.message, e.details, { ...e.headers, ...headers() });
    throw e;
  }
}

/**
 * `hits` reordered by the reranker: the first `depth` sent, each answered with its
 * relevance_score as its score, best first; those it left out of its answer follow in their order,
 * each just below the lowest scored. Unchanged when no reranker is configured or it failed.
 */
export async function rerank(
  core: Pick<Core, "config" | "logger" | "shutdown">,
  query: string,
  hits: readonly Scored[],
  depth: number,
  cost?: RerankCost,
): Promise<Scored[]> {
  const s = rerankSettings(core.config);
  if (!s || hits.length === 0) return [...hits];
  const head = hits.slice(0, depth);
  const timeout = AbortSignal.timeout(s.timeoutMs);
  const signal = core.shutdown ? AbortSignal.any([timeout, core.shutdown]) : timeout;
  const started = performance.now();
  rerankingStats.calls++;
  rerankingStats.documents += head.length;
  if (cost) cost.calls++;
  try {
    const r = await fetch(`${s.baseUrl}/rerank`, {
      method: "POST",
      headers: { "content-type": "application/json", ...(s.apiKey ? { authorization: `Bearer ${s.apiKey}` } : {}) },
      body: JSON.stringify({
        model: s.model,
        query,
        documents: head.map((h) => h.memory.content),
        top_n: head.length,
      }),
      signal,
    });
    if (!r.ok) throw new Error(`the reranker answered HTTP ${r.status}`);
    const body = (await r.json()) as { results?: { index?: unknown; relevance_score?: unknown; score?: unknown }[] };
    if (!Array.isArray(body.results)) throw new Error("the reranker's answer has no results list");
    const scored: Scored[] = [];
    const seen = new Set<number>();
    for (const x of body.results) {
      const i = x.index;
      const score = typeof x.relevance_score === "number" ? x.relevance_score : x.score;
      if (typeof i !== "number" || !Number.isInteger(i) || i < 0 || i >= head.length || seen.has(i))
        throw new Error("the reranker's answer names a document it was not sent");
      if (typeof score !== "number" || !Number.isFinite(score)) throw new Error("the reranker's answer has no score");
      seen.add(i);
      scored.push({ memory: head[i].memory, score });
    }
    // Best first (ties as the reranker listed them).
    scored.sort((a, b) => b.score - a.score);
    let low = scored.length ? scored[scored.length - 1].score : 0;
    for (let i = 0; i < hits.length; i++)
      if (i >= head.length || !seen.has(i)) {
        low = nextBelow(low);
        scored.push({ memory: hits[i].memory, score: low });
      }
    return scored;
  } catch (e) {
    rerankingStats.errors++;
    core.logger.warn("reranking failed; answering in the search's order", {
      error: timeout.aborted ? "the reranker did not answer in time" : (e as Error).message,
    });
    return [...hits];
  } finally {
    rerankingStats.latencyMs += performance.now() - started;
  }
}

/** A score just below x (scores stay in order when the reranker's are small). */
const nextBelow = (x: number) => x - Math.max(Math.abs(x) * 1e-9, 1e-9);
