// Embeddings through any OpenAI-compatible endpoint (Ollama, vLLM, llama.cpp, OpenAI), with the
// ai SDK. A failed or slow call never fails a store: the memory is written with its vector
// "pending" and the worker (worker.ts) embeds it later.
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { embedMany } from "ai";
import type { Config } from "../config/config";
import type { Core } from "../core";
import type { MemoryOp } from "../storage/storage";
import { ApiError } from "../wire/errors";

export interface EmbedSettings {
  baseUrl: string;
  model: string;
  apiKey?: string;
  dimensions?: number;
  timeoutMs: number;
}

/** What embedding calls cost one request, for the x-memd-embed-* headers. */
export interface EmbedCost {
  calls: number;
  tokens: number;
}

export const newCost = (): EmbedCost => ({ calls: 0, tokens: 0 });

/** The x-memd-embed-* headers of an answer. */
export const embedHeaders = (c: EmbedCost): Record<string, string> => ({
  "x-memd-embed-calls": String(c.calls),
  "x-memd-embed-tokens": String(c.tokens),
});

/**
 * Runs a request's work with a fresh cost and reports the embedding calls it made in the
 * answer's x-memd-embed-* headers, on a refusal (ApiError) as on success.
 */
export async function withEmbedCost<T>(set: { headers: object }, run: (cost: EmbedCost) => Promise<T>): Promise<T> {
  const cost = newCost();
  try {
    const res = await run(cost);
    Object.assign(set.headers, embedHeaders(cost));
    return res;
  } catch (e) {
    if (e instanceof ApiError)
      throw new ApiError(e.code, e.message, e.details, { ...e.headers, ...embedHeaders(cost) });
    throw e;
  }
}

/** Running totals since start, read by /metrics through its embedStats hook. */
export const embeddingStats = { calls: 0, errors: 0, tokens: 0, latencyMs: 0 };

/** embeddingStats in the shape of ops/metrics' EmbedStats (structurally; no import of ops). */
export function embedStats() {
  const s = embeddingStats;
  return { calls: s.calls, errors: s.errors, tokens: s.tokens, latencySeconds: s.latencyMs / 1000 };
}

/** The embedding settings from the config, or undefined when no embedding model is configured. */
export function embedSettings(config: Config): EmbedSettings | undefined {
  if (!config.embedBaseUrl) return undefined;
  return {
    baseUrl: config.embedBaseUrl,
    model: config.embedModel ?? "default",
    apiKey: config.embedApiKey,
    dimensions: config.embedDimensions,
    timeoutMs: config.embedTimeoutMs,
  };
}

export class EmbedError extends Error {
  constructor(readonly timedOut: boolean) {
    super(
      timedOut ? "the embedding model did not answer in time" : "the embedding model could not be reached or failed",
    );
  }
}

const models = new WeakMap<EmbedSettings, ReturnType<ReturnType<typeof createOpenAICompatible>["embeddingModel"]>>();

/**
 * Embeds `texts` in one call (the SDK would split only past 2048 inputs), adding to `cost` and
 * the totals. Throws EmbedError; messages never hold the key or the upstream body. `stop` (the
 * server's shutdown) aborts the call with 503 shutting_down instead.
 */
export async function embedTexts(
  s: EmbedSettings,
  texts: string[],
  cost: EmbedCost,
  stop?: AbortSignal,
): Promise<Float32Array[]> {
  if (texts.length === 0) return [];
  let model = models.get(s);
  if (!model) {
    model = createOpenAICompatible({ name: "memd", baseURL: s.baseUrl, apiKey: s.apiKey }).embeddingModel(s.model);
    models.set(s, model);
  }
  const timeout = AbortSignal.timeout(s.timeoutMs);
  const signal = stop ? AbortSignal.any([timeout, stop]) : timeout;
  const started = performance.now();
  cost.calls++;
  embeddingStats.calls++;
  try {
    const r = await embedMany({
      model,
      values: texts,
      maxRetries: 0, // the worker retries, with backoff
      abortSignal: signal,
      ...(s.dimensions ? { dimensions: s.dimensions } : {}),
    });
    const tokens = r.usage?.tokens ?? 0;
    cost.tokens += tokens;
    embeddingStats.tokens += tokens;
    return r.embeddings.map((e) => Float32Array.from(e));
  } catch {
    embeddingStats.errors++;
    if (stop?.aborted) throw new ApiError("shutting_down", "the server is shutting down");
    throw new EmbedError(timeout.aborted);
  } finally {
    embeddingStats.latencyMs += performance.now() - started;
  }
}

/**
 * Gives every op that writes new content (ADD, REPLACE, a patch of content) its vector, from one
 * batched call before the write transaction. Without a model the ops are returned as they are;
 * when the call fails they carry "pending", so the store succeeds and the worker catches up.
 */
export function withVectors(core: Core, ops: MemoryOp[], cost: EmbedCost): MemoryOp[] | Promise<MemoryOp[]> {
  const s = embedSettings(core.config);
  // Without a model, no promise: this runs on every store.
  return s ? embedOps(core, s, ops, cost) : ops;
}

async function embedOps(core: Core, s: EmbedSettings, ops: MemoryOp[], cost: EmbedCost): Promise<MemoryOp[]> {
  const texts: string[] = [];
  const at: number[] = [];
  ops.forEach((op, i) => {
    const text =
      "create" in op
        ? op.create.content
        : "patch" in op
          ? op.patch.content
          : op.event === "REVERT"
            ? op.to?.content
            : undefined;
    if (text !== undefined) {
      texts.push(text);
      at.push(i);
    }
  });
  if (texts.length === 0) return ops;
  let vectors: (Float32Array | "pending")[];
  try {
    vectors = await embedTexts(s, texts, cost, core.shutdown);
  } catch (e) {
    if (!(e instanceof EmbedError)) throw e;
    core.logger.warn("embedding failed; stored without vectors, the worker retries", { error: (e as Error).message });
    vectors = texts.map(() => "pending");
  }
  const out = [...ops];
  at.forEach((i, j) => {
    const op = out[i];
    if ("create" in op) out[i] = { ...op, create: { ...op.create, vector: vectors[j] } };
    else if ("patch" in op) out[i] = { ...op, patch: { ...op.patch, vector: vectors[j] } };
    else if (op.event === "REVERT") out[i] = { ...op, vector: vectors[j] };
  });
  return out;
}
