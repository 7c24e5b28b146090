import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { Value } from "@sinclair/typebox/value";
import { generateText, type Output } from "ai";
import type { StructuredMode } from "../config/config";
import { type Candidate, ModelAnswer, NOT_A_CATEGORY, type Operation } from "./model";
import { buildPrompt } from "./prompt";

export type { StructuredMode };

export type LlmSettings = {
  baseUrl: string;
  model: string;
  apiKey?: string;
  /** Per model call; the one retry gets its own budget. */
  timeoutMs?: number;
  /** How the answer's shape is asked for; default json_schema. */
  structured?: StructuredMode;
};

export type LlmErrorCode = "llm_upstream_error" | "llm_timeout" | "llm_bad_output" | "shutting_down";

const STATUS: Record<LlmErrorCode, number> = {
  llm_upstream_error: 502,
  llm_timeout: 504,
  llm_bad_output: 502,
  shutting_down: 503,
};

/**
 * A failed extraction. Messages never hold the API key or the upstream body.
 * `calls` and `tokens` say what the failed attempt cost, for headers and metrics;
 * `promptTokens` is the prompt share of `tokens`.
 */
export class LlmError extends Error {
  readonly status: number;
  constructor(
    readonly code: LlmErrorCode,
    message: string,
    readonly calls = 0,
    readonly tokens = 0,
    readonly promptTokens = 0,
    /** For the log only: what went wrong on the way to the model (host and cause, never a key). */
    readonly detail?: string,
  ) {
    super(message);
    this.name = "LlmError";
    this.status = STATUS[code];
  }
}

/** `tokens` is prompt plus completion tokens as reported; `promptTokens` is the prompt share. */
export type Extraction = { operations: Operation[]; calls: number; tokens: number; promptTokens: number };

/**
 * Asks the model, in one call, which facts the content holds and what to do
 * with each against the offered memories. Retries once on an invalid answer,
 * so it makes at most two calls. Throws LlmError.
 */
export async function extractOperations(
  settings: LlmSettings,
  content: string,
  memories: readonly Candidate[],
  /** Aborted at shutdown: the call stops and throws LlmError("shutting_down"). */
  stop?: AbortSignal,
  /** When the content was said (ms): the date the model resolves relative dates against. */
  contentDate?: number,
): Promise<Extraction> {
  const mode = settings.structured ?? "json_schema";
  const provider = createOpenAICompatible({
    name: "memd",
    baseURL: settings.baseUrl,
    apiKey: settings.apiKey,
    supportsStructuredOutputs: mode === "json_schema",
  });
  const prompt = buildPrompt(content, memories, mode === "prompt", contentDate);
  let calls = 0;
  let tokens = 0;
  let promptTokens = 0;
  let note = "";
  for (let attempt = 0; attempt < 2; attempt++) {
    if (stop?.aborted) throw new LlmError("shutting_down", "the server is shutting down", calls, tokens, promptTokens);
    const timeout = AbortSignal.timeout(settings.timeoutMs ?? 30_000);
    const signal = stop ? AbortSignal.any([timeout, stop]) : timeout;
    calls++;
    let text: string;
    try {
      const result = await generateText({
        model: provider.chatModel(settings.model),
        system: prompt.system,
        prompt: prompt.user + note,
        output: rawOutput(mode),
        // Non-strict: OpenAI's strict mode demands every key be required,
        // which would force small models to invent values.
        providerOptions: { openaiCompatible: { strictJsonSchema: false } },
        maxRetries: 0, // the retry policy is ours: one retry, on bad output only
        abortSignal: signal,
      });
      text = result.text;
      promptTokens += result.totalUsage.inputTokens ?? 0;
      tokens += (result.totalUsage.inputTokens ?? 0) + (result.totalUsage.outputTokens ?? 0);
    } catch (error) {
      if (stop?.aborted)
        throw new LlmError("shutting_down", "the server is shutting down", calls, tokens, promptTokens);
      if (timeout.aborted)
        throw new LlmError("llm_timeout", "the model did not answer in time", calls, tokens, promptTokens);
      throw new LlmError(
        "llm_upstream_error",
        upstreamMessage(error),
        calls,
        tokens,
        promptTokens,
        upstreamCause(error, settings.baseUrl),
      );
    }
    const parsed = parseAnswer(text);
    if (parsed.ok) return { operations: parsed.answer.operations, calls, tokens, promptTokens };
    // Appended to the same user message: some chat templates reject two user turns in a row.
    note = `\n\nYour previous answer was invalid (${parsed.errors.join("; ")}). Answer again with only the JSON object.`;
  }
  throw new LlmError("llm_bad_output", "the model's answer was invalid twice", calls, tokens, promptTokens);
}

/** The response format per mode; the SDK's own Output parsers would reject a fenced answer, so the text comes back raw. */
function rawOutput(mode: StructuredMode): Output.Output<string, undefined, never> {
  // The JSON round trip drops TypeBox's symbol keys, leaving plain JSON Schema.
  const format =
    mode === "json_schema"
      ? ({ type: "json", name: "memory_operations", schema: JSON.parse(JSON.stringify(ModelAnswer)) } as const)
      : mode === "json_object"
        ? ({ type: "json" } as const)
        : ({ type: "text" } as const);
  return {
    name: "memd-raw",
    responseFormat: Promise.resolve(format),
    parseCompleteOutput: async ({ text }) => text,
    parsePartialOutput: async () => undefined,
    createElementStreamTransform: () => undefined,
  };
}

function upstreamMessage(error: unknown): string {
  const status = (error as { statusCode?: unknown })?.statusCode;
  return typeof status === "number" && status !== 200
    ? `the model server answered HTTP ${status}`
    : "the model server could not be reached or answered in an unknown format";
}

/**
 * Why a model call failed, naming the endpoint's host: "connection refused", "DNS lookup failed",
 * "TLS handshake failed", "HTTP 503". Never the key, never the upstream body.
 */
export function upstreamCause(error: unknown, baseUrl: string): string {
  let host = baseUrl;
  try {
    host = new URL(baseUrl).host;
  } catch {}
  const status = (error as { statusCode?: unknown })?.statusCode;
  if (typeof status === "number") return `${host}: HTTP ${status}`;
  // The SDK wraps the fetch failure; walk the cause chain for a system error code.
  const seen: string[] = [];
  for (let e: unknown = error, i = 0; e && i < 6; e = (e as { cause?: unknown }).cause, i++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === "string") seen.push(code);
    const msg = String((e as Error).message ?? "");
    if (/certificate|ssl|tls/i.test(msg)) seen.push("TLS");
  }
  const has = (...codes: string[]) => seen.some((c) => codes.includes(c));
  if (has("ECONNREFUSED", "ConnectionRefused")) return `${host}: connection refused`;
  if (has("ENOTFOUND", "EAI_AGAIN", "DNSException")) return `${host}: DNS lookup failed`;
  if (has("TLS") || seen.some((c) => /CERT|TLS|SSL/.test(c))) return `${host}: TLS handshake failed`;
  if (has("ECONNRESET", "ConnectionClosed")) return `${host}: connection reset`;
  if (has("ETIMEDOUT")) return `${host}: connection timed out`;
  return `${host}: ${seen[0] ?? "no answer in the expected format"}`;
}

export type ParsedAnswer = { ok: true; answer: ModelAnswer } | { ok: false; errors: string[] };

/**
 * Finds the JSON answer in a model's text (bare, in a code fence or amid prose)
 * and validates it. Optional keys that are missing or null get their defaults;
 * a bare array is taken as the operations list; decisions are upper-cased.
 */
export function parseAnswer(text: string): ParsedAnswer {
  let firstErrors: string[] | undefined;
  for (const value of jsonCandidates(text)) {
    const answer = coerce(value);
    if (Value.Check(ModelAnswer, answer)) return { ok: true, answer };
    firstErrors ??= [...Value.Errors(ModelAnswer, answer)].slice(0, 3).map((e) => `${e.path || "/"}: ${e.message}`);
  }
  return { ok: false, errors: firstErrors ?? ["no JSON object found"] };
}

function coerce(value: unknown): unknown {
  const answer = Array.isArray(value) ? { operations: value } : value;
  const ops = (answer as { operations?: unknown })?.operations;
  if (!Array.isArray(ops)) return answer;
  const operations = ops.map((op) => {
    if (op === null || typeof op !== "object") return op;
    const kept = Object.entries(op).filter(([, v]) => v !== null);
    const clean = Object.fromEntries(kept.map(([k, v]) => [k, loosen(k, v)]));
    return Value.Default(
      ModelAnswer.properties.operations.items,
      Value.Clean(ModelAnswer.properties.operations.items, clean),
    );
  });
  return { operations };
}

/**
 * What a model gets slightly wrong and means plainly: a decision's case, an importance out of
 * 0–1; and a category of the wrong shape, marked so that only its operation is dropped.
 */
function loosen(key: string, v: unknown): unknown {
  if (key === "decision" && typeof v === "string") return v.trim().toUpperCase();
  if (key === "category" && typeof v !== "string") return NOT_A_CATEGORY;
  if (key === "importance" && typeof v === "number" && Number.isFinite(v)) return Math.min(1, Math.max(0, v));
  return v;
}

// Each JSON span tried costs a scan to its end; the cap keeps a long, bracket-heavy answer linear.
// (Not the memories shown to the model: that is MAX_CANDIDATES in service.ts.)
const MAX_JSON_SPANS = 20;

/** Yields, in order, every balanced {...} or [...] span of the text that parses as JSON. */
function* jsonCandidates(text: string): Generator<unknown> {
  let tried = 0;
  for (let start = 0; start < text.length && tried < MAX_JSON_SPANS; start++) {
    const c = text[start];
    if (c !== "{" && c !== "[") continue;
    tried++;
    const end = matchingEnd(text, start);
    if (end < 0) continue;
    try {
      yield JSON.parse(text.slice(start, end + 1));
      start = end; // a parsed span is not searched again for nested candidates
    } catch {}
  }
}

/** Index of the bracket closing the one at `start`, skipping over JSON strings; -1 if unbalanced. */
function matchingEnd(text: string, start: number): number {
  let depth = 0;
  let inString = false;
  for (let i = start; i < text.length; i++) {
    const c = text[i];
    if (inString) {
      if (c === "\\") i++;
      else if (c === '"') inString = false;
    } else if (c === '"') inString = true;
    else if (c === "{" || c === "[") depth++;
    else if (c === "}" || c === "]") {
      depth--;
      if (depth === 0) return i;
    }
  }
  return -1;
}
