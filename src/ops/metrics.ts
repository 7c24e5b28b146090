import { Elysia } from "elysia";
import type { Core } from "../core";
import type { auth } from "../keys/auth";
import type { Upkeep } from "../storage/storage";
import { ApiError } from "../wire/errors";

/**
 * Running totals of language-model calls, as the extraction feature keeps them. `/metrics`
 * reads them through the `modelStats` hook of `metricsRoutes`, so ops never imports a feature.
 */
export interface ModelStats {
  calls: number;
  errors?: number;
  promptTokens: number;
  completionTokens: number;
  /** Sum of call latencies, in seconds. */
  latencySeconds: number;
}

/** Running totals of embedding calls, read through the `embedStats` hook of `metricsRoutes`. */
export interface EmbedStats {
  calls: number;
  errors: number;
  tokens: number;
  latencySeconds: number;
}

/** Embedding call totals in Prometheus text; zeros when no source is wired. */
export function embedMetrics(s: EmbedStats | undefined): string {
  const v = s ?? { calls: 0, errors: 0, tokens: 0, latencySeconds: 0 };
  return [
    gauge(
      "memd_embed_calls_total",
      "Embedding calls made by stores, searches and the embedding worker.",
      v.calls,
      "counter",
    ),
    gauge("memd_embed_call_errors_total", "Embedding calls that failed or timed out.", v.errors, "counter"),
    gauge("memd_embed_tokens_total", "Tokens reported by the embedding model.", v.tokens, "counter"),
    gauge("memd_embed_call_seconds_total", "Time spent waiting for the embedding model.", v.latencySeconds, "counter"),
  ].join("\n");
}

// Upper bounds in seconds; the store path lives between 0.5 ms and a few ms, the model path in seconds.
const buckets = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

interface RouteStats {
  method: string;
  route: string;
  byStatus: Map<number, number>;
  bucketCounts: number[];
  sum: number;
  count: number;
}

/** Request counters and latency histograms per route template. Recording is a Map lookup and a few increments. */
export class RequestMetrics {
  private readonly routes = new Map<string, RouteStats>();

  /** Counts one answered request; `route` is the template (`/v1/memory/:id`), never the raw path. */
  observe(method: string, route: string, status: number, seconds: number) {
    const key = `${method} ${route}`;
    let r = this.routes.get(key);
    if (!r) {
      r = { method, route, byStatus: new Map(), bucketCounts: new Array(buckets.length).fill(0), sum: 0, count: 0 };
      this.routes.set(key, r);
    }
    r.byStatus.set(status, (r.byStatus.get(status) ?? 0) + 1);
    r.count++;
    r.sum += seconds;
    for (let i = 0; i < buckets.length; i++)
      if (seconds <= buckets[i]) {
        r.bucketCounts[i]++;
        break;
      }
  }

  /** The counters and histograms in Prometheus text format. */
  render(): string {
    const out = [
      "# HELP memd_http_requests_total Requests answered, by route template and status.",
      "# TYPE memd_http_requests_total counter",
    ];
    for (const r of this.routes.values())
      for (const [status, n] of r.byStatus) out.push(`memd_http_requests_total{${labels(r)},status="${status}"} ${n}`);
    out.push(
      "# HELP memd_http_request_duration_seconds Time from request to response, by route template.",
      "# TYPE memd_http_request_duration_seconds histogram",
    );
    for (const r of this.routes.values()) {
      let cumulative = 0;
      for (let i = 0; i < buckets.length; i++) {
        cumulative += r.bucketCounts[i];
        out.push(`memd_http_request_duration_seconds_bucket{${labels(r)},le="${buckets[i]}"} ${cumulative}`);
      }
      out.push(`memd_http_request_duration_seconds_bucket{${labels(r)},le="+Inf"} ${r.count}`);
      out.push(`memd_http_request_duration_seconds_sum{${labels(r)}} ${r.sum}`);
      out.push(`memd_http_request_duration_seconds_count{${labels(r)}} ${r.count}`);
    }
    return out.join("\n");
  }
}

const labels = (r: RouteStats) => `method="${r.method}",route="${escapeLabel(r.route)}"`;
const escapeLabel = (s: string) => s.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n");

function gauge(name: string, help: string, value: number, type = "gauge") {
  return `# HELP ${name} ${help}\n# TYPE ${name} ${type}\n${name} ${value}`;
}

/** Store figures read at scrape time: counts of memories and events, and the backend's own gauges. */
export async function storeMetrics(core: Core<Upkeep>): Promise<string> {
  const s = await core.storage.stats();
  return [
    ...Object.entries(s.gauges).map(([name, [help, value]]) => gauge(name, help, value)),
    ...Object.entries(s.counters ?? {}).map(([name, [help, value]]) => gauge(name, help, value, "counter")),
    gauge("memd_memories", "Current memories (not deleted, replaced or swept after expiry).", s.currentMemories),
    gauge("memd_memory_records", "Memory records kept, current or not.", s.memoryRecords),
    gauge("memd_events", "Audit events stored.", s.events),
    gauge(
      "memd_embed_pending",
      "Current memories waiting for their embedding (stored while the embedding endpoint failed).",
      s.pendingEmbeddings,
    ),
  ].join("\n");
}

/** Model call totals in Prometheus text; zeros when no source is wired (no smart store yet). */
export function modelMetrics(s: ModelStats | undefined): string {
  const v = s ?? { calls: 0, errors: 0, promptTokens: 0, completionTokens: 0, latencySeconds: 0 };
  return [
    gauge("memd_model_calls_total", "Language-model calls made by smart store.", v.calls, "counter"),
    gauge("memd_model_call_errors_total", "Language-model calls that failed or timed out.", v.errors ?? 0, "counter"),
    "# HELP memd_model_tokens_total Tokens reported by the model, by kind.\n# TYPE memd_model_tokens_total counter",
    `memd_model_tokens_total{kind="prompt"} ${v.promptTokens}`,
    `memd_model_tokens_total{kind="completion"} ${v.completionTokens}`,
    gauge(
      "memd_model_call_seconds_total",
      "Time spent waiting for the model, summed over calls.",
      v.latencySeconds,
      "counter",
    ),
  ].join("\n");
}

export interface MetricsOptions {
  core: Core<Upkeep>;
  authPlugin: ReturnType<typeof auth>;
  /** Serve /metrics without a key; otherwise it needs an admin key (see config `metricsPublic`). */
  public: boolean;
  /** Hook for the extraction feature's running totals (see ModelStats). */
  modelStats?: () => ModelStats | undefined;
  /** Hook for the embedding feature's running totals (see EmbedStats). */
  embedStats?: () => EmbedStats | undefined;
  /** Request counters filled by the request pipeline (src/http/pipeline.ts). */
  requests: RequestMetrics;
  /** More figures in Prometheus text, from features (webhooks), read at scrape time. */
  extra?: (() => Promise<string>)[];
}

/**
 * Records every answered request by route template and status, and serves `GET /metrics`.
 * The auth plugin must list /metrics in `protectedPaths` unless it is public.
 */
export function metricsRoutes({
  core,
  authPlugin,
  public: isPublic,
  modelStats,
  embedStats,
  requests,
  extra = [],
}: MetricsOptions) {
  const started = Date.now();
  const render = async () =>
    [
      requests.render(),
      modelMetrics(modelStats?.()),
      embedMetrics(embedStats?.()),
      await storeMetrics(core),
      ...(await Promise.all(extra.map((f) => f()))),
      gauge("memd_uptime_seconds", "Seconds since the server started.", (Date.now() - started) / 1000),
      "",
    ].join("\n");
  const text = { "content-type": "text/plain; version=0.0.4; charset=utf-8" };
  const base = new Elysia({ name: "metrics" }).use(authPlugin);
  const detail = {
    summary: "Prometheus metrics",
    description: isPublic
      ? "Public (MEMD_METRICS_PUBLIC=true)."
      : "Needs an admin key scoped to * unless MEMD_METRICS_PUBLIC=true.",
  };
  return isPublic
    ? base.get("/metrics", async () => new Response(await render(), { headers: text }), { detail })
    : base.get(
        "/metrics",
        async ({ apiKey }) => {
          // The figures count every namespace, so a key scoped to some of them may not read them.
          if (!apiKey.namespaces.includes("*"))
            throw new ApiError("forbidden", "/metrics needs an admin key scoped to all namespaces (*)");
          return new Response(await render(), { headers: text });
        },
        { permission: "admin", detail },
      );
}
