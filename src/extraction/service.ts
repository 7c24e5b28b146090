// The smart store (infer: true): exact duplicates first, then one model call
// that extracts and reconciles together, then one write. Without a configured
// model, the built-in extractor takes the model's place.
import type { Config } from "../config/config";
import type { Core } from "../core";
import { type EmbedCost, embedHeaders, newCost } from "../embedding/client";
import type { IdempotencySlot } from "../http/idempotency";
import type { MemoryRecord, ObserveChanges, StoreRequest, StoreResponse } from "../memory/model";
import { checkStoreLimits } from "../memory/service";
import { relatedMemories } from "../search/service";
import { ApiError } from "../wire/errors";
import { parseIsoTime } from "../wire/time";
import { extractBuiltin, normalizeFact, splitFacts } from "./builtin";
import { extractOperations, LlmError, type LlmSettings } from "./llm";
import type { Operation } from "./model";
import { applyChanges, type Change, validateOperations } from "./reconcile";

/** How many of an entity's current memories are read per smart store; the scan stops there. */
export const MAX_ENTITY_SCAN = 2000;
/** How many of them the model is shown, most related first. */
export const MAX_CANDIDATES = 20;

/**
 * Running totals since the process started, for the metrics endpoint to read.
 * `llmLatencyMs` sums the wall time of extractions (a retry included); `llmErrors` counts
 * extractions that failed (upstream error, timeout, invalid answer twice).
 */
export const extractionStats = {
  llmStores: 0,
  builtinStores: 0,
  llmCalls: 0,
  llmPromptTokens: 0,
  llmTokens: 0,
  llmLatencyMs: 0,
  llmErrors: 0,
  droppedOperations: 0,
};

/** extractionStats in the shape of ops/metrics' ModelStats (structurally; no import of ops). */
export function modelStats() {
  const s = extractionStats;
  return {
    calls: s.llmCalls,
    errors: s.llmErrors,
    promptTokens: s.llmPromptTokens,
    completionTokens: s.llmTokens - s.llmPromptTokens,
    latencySeconds: s.llmLatencyMs / 1000,
  };
}

type Headers = { headers: Record<string, unknown> };
type Cost = { extractor: "llm" | "builtin"; calls: number; tokens: number; promptTokens: number };

const costHeaders = (c: Cost): Record<string, string> => ({
  "x-memd-extractor": c.extractor,
  "x-memd-llm-calls": String(c.calls),
  "x-memd-llm-tokens": String(c.tokens),
});

/** The model settings from the config, or undefined when no model is configured. */
export function llmSettings(core: Core): LlmSettings | undefined {
  const c = core.config;
  if (!c.llmBaseUrl) return undefined;
  return {
    baseUrl: c.llmBaseUrl,
    model: c.llmModel ?? "default",
    apiKey: c.llmApiKey,
    timeoutMs: c.llmTimeoutMs,
    structured: c.llmStructured,
  };
}

/** The extractor in use, for the start-up log: "built-in", or "<model> at <host>". */
export function describeExtractor(config: Config): string {
  if (!config.llmBaseUrl) return "built-in";
  let host = config.llmBaseUrl;
  try {
    host = new URL(config.llmBaseUrl).host;
  } catch {}
  return `${config.llmModel ?? "default"} at ${host}`;
}

/**
 * Builds the smart store handler for `memoryRoutes`. It holds the per-(namespace, entity) mutex
 * and the per-key count of smart stores in flight, so build it once per running server.
 * Every answer, success or error, carries the x-memd-extractor and x-memd-llm-* headers.
 */
export function createSmartStore(core: Core, shutdown?: AbortSignal) {
  const inFlight = new Map<string, number>();
  const settings = llmSettings(core);

  return async function smartStore(
    req: StoreRequest,
    actorKeyId: string,
    set: Headers,
    idempotency?: IdempotencySlot,
    observe?: ObserveChanges,
  ): Promise<StoreResponse> {
    const cost: Cost = { extractor: settings ? "llm" : "builtin", calls: 0, tokens: 0, promptTokens: 0 };
    const embedCost = newCost();
    const headers = () => ({ ...costHeaders(cost), ...embedHeaders(embedCost) });
    try {
      checkStoreLimits(core, req);
      const serialized = <T>(fn: () => Promise<T>) => core.storage.serialize(req.namespace, req.entity, fn);
      if (!settings) {
        const res = await serialized(() => storeBuiltin(core, req, actorKeyId, embedCost, idempotency, observe));
        extractionStats.builtinStores++;
        Object.assign(set.headers, headers());
        return res;
      }
      // Only the model path is limited: it is the one that costs money and upstream capacity. A
      // store counts once it holds its entity (stores queued for one entity call no model yet).
      const res = await serialized(async () => {
        const running = inFlight.get(actorKeyId) ?? 0;
        if (running >= core.config.maxModelCallsPerKey) {
          const message = `at most ${core.config.maxModelCallsPerKey} smart stores per key at a time`;
          throw new ApiError("rate_limited", message, undefined, { "retry-after": "1" });
        }
        inFlight.set(actorKeyId, running + 1);
        try {
          return await storeWithModel(core, settings, req, actorKeyId, cost, embedCost, shutdown, idempotency, observe);
        } finally {
          const n = (inFlight.get(actorKeyId) ?? 1) - 1;
          if (n > 0) inFlight.set(actorKeyId, n);
          else inFlight.delete(actorKeyId);
        }
      });
      extractionStats.llmStores++;
      Object.assign(set.headers, headers());
      return res;
    } catch (e) {
      if (e instanceof LlmError) {
        extractionStats.llmErrors++;
        core.logger.warn("model call failed", {
          code: e.code,
          calls: e.calls,
          ...(e.detail ? { cause: e.detail } : {}),
        });
        throw new ApiError(e.code, e.message, undefined, headers());
      }
      if (e instanceof ApiError) throw new ApiError(e.code, e.message, e.details, { ...e.headers, ...headers() });
      throw e;
    }
  };
}

/**
 * The memories a smart store may act on: keyed facts are left alone (no event names them) unless
 * the store asks for them (includeKeyed: true).
 */
const unkeyed = (req: StoreRequest, ms: MemoryRecord[]) =>
  req.includeKeyed ? ms : ms.filter((m) => m.key === undefined);

async function storeBuiltin(
  core: Core,
  req: StoreRequest,
  actorKeyId: string,
  embedCost: EmbedCost,
  idempotency?: IdempotencySlot,
  observe?: ObserveChanges,
): Promise<StoreResponse> {
  const current = unkeyed(req, await core.storage.currentMemories(req, MAX_ENTITY_SCAN));
  const { facts, skipped } = extractBuiltin(req.content, current);
  const changes: Change[] = [];
  let orphanSkips = 0;
  for (const s of skipped) {
    if (s.duplicateOf) changes.push({ kind: "SKIP_DUPLICATE", fact: s.fact, target: s.duplicateOf });
    else orphanSkips++; // a repeat of an earlier fact of the same content: no memory to attach an event to
  }
  for (const fact of facts) changes.push({ kind: "ADD", fact });
  return applyChanges(core, req, actorKeyId, changes, orphanSkips, embedCost, idempotency, observe);
}

async function storeWithModel(
  core: Core,
  settings: LlmSettings,
  req: StoreRequest,
  actorKeyId: string,
  cost: Cost,
  embedCost: EmbedCost,
  shutdown?: AbortSignal,
  idempotency?: IdempotencySlot,
  observe?: ObserveChanges,
): Promise<StoreResponse> {
  const current = unkeyed(req, await core.storage.currentMemories(req, MAX_ENTITY_SCAN));
  const byNorm = new Map(current.map((m) => [normalizeFact(m.content), m]));

  // Exact duplicates of current memories are settled here, without the model.
  const changes: Change[] = [];
  const facts = splitFacts(req.content);
  const rest: string[] = [];
  for (const fact of facts) {
    const dup = byNorm.get(normalizeFact(fact));
    if (dup) changes.push({ kind: "SKIP_DUPLICATE", fact, target: dup });
    else rest.push(fact);
  }
  if (rest.length === 0 && facts.length > 0)
    return applyChanges(core, req, actorKeyId, changes, 0, embedCost, idempotency, observe);
  // Untouched content keeps its wording and layout; otherwise only the facts left are sent.
  const content = changes.length === 0 ? req.content : rest.join("\n");

  // From hybrid search in the entity (keyword without an embedding model), so that a paraphrase
  // without a shared word ("doesn't eat meat" / "is vegetarian") is still offered.
  const candidates = unkeyed(
    req,
    await relatedMemories(core, req.namespace, req.entity, content, MAX_CANDIDATES, embedCost),
  );
  const handles = new Map<string, MemoryRecord>(candidates.map((m, i) => [`m${i + 1}`, m]));
  const offered = [...handles].map(([handle, m]) => ({ handle, content: m.content, category: m.category }));

  const started = performance.now();
  let operations: Operation[];
  try {
    // The content's date: its observedAt (checked by checkStoreLimits), else now.
    const said = req.observedAt === undefined ? Date.now() : (parseIsoTime(req.observedAt) ?? Date.now());
    const extraction = await extractOperations(settings, content, offered, shutdown, said);
    operations = extraction.operations;
    cost.calls = extraction.calls;
    cost.tokens = extraction.tokens;
    cost.promptTokens = extraction.promptTokens;
  } catch (e) {
    if (e instanceof LlmError) {
      cost.calls = e.calls;
      cost.tokens = e.tokens;
      cost.promptTokens = e.promptTokens;
    }
    throw e;
  } finally {
    extractionStats.llmLatencyMs += performance.now() - started;
    extractionStats.llmCalls += cost.calls;
    extractionStats.llmTokens += cost.tokens;
    extractionStats.llmPromptTokens += cost.promptTokens;
  }

  const checked = validateOperations(
    operations,
    handles,
    current,
    core.logger,
    core.config.maxContentBytes,
    new Set(changes.map((c) => (c.kind === "ADD" ? "" : c.target.id))),
  );
  extractionStats.droppedOperations += operations.length - checked.changes.length;
  return applyChanges(
    core,
    req,
    actorKeyId,
    [...changes, ...checked.changes],
    checked.repeated,
    embedCost,
    idempotency,
    observe,
  );
}
