import { Elysia } from "elysia";
import { auditRoutes } from "./audit/index";
import { streamRoutes } from "./audit/stream";
import { StreamHub } from "./audit/stream-service";
import { browseRoutes } from "./browse/index";
import { consolidateRoutes } from "./consolidate/index";
import { consolidationMetrics } from "./consolidate/service";
import { contextRoutes } from "./context/index";
import type { Core } from "./core";
import { errorHandler } from "./http/error-handler";
import { jsonBody, maxBodyBytes } from "./http/json-body";
import type { RouteInfo } from "./http/methods";
import { pipeline } from "./http/pipeline";
import { requestInfo } from "./http/request-log";
import { auth, authenticator } from "./keys/auth";
import { keyRoutes } from "./keys/index";
import type { KeyRecord } from "./keys/model";
import { mcpRoutes } from "./mcp/index";
import { isMem0Path, mem0ErrorBody, mem0Routes } from "./mem0/index";
import { directStore, memoryRoutes, type SmartStore } from "./memory/index";
import { healthRoutes } from "./ops/health";
import { type EmbedStats, type ModelStats, metricsRoutes, RequestMetrics } from "./ops/metrics";
import { openapiRoutes } from "./ops/openapi";
import { revertRoutes } from "./revert/index";
import { searchRoutes } from "./search/index";
import { rerankMetrics } from "./search/rerank";
import { transferRoutes } from "./transfer/index";
import { uiRoutes } from "./ui/index";
import type { Deliverer } from "./webhooks/deliverer";
import { webhookRoutes } from "./webhooks/index";
import { webhookMetrics } from "./webhooks/metrics";

export interface AppOptions {
  root?: KeyRecord;
  smartStore?: SmartStore;
  /** Running totals of model calls for /metrics (from the extraction feature). */
  modelStats?: () => ModelStats | undefined;
  /** Registry of open event streams, so the server can end them on stop. */
  streams?: StreamHub;
  /** Running totals of embedding calls for /metrics (from the embedding feature). */
  embedStats?: () => EmbedStats | undefined;
  /** The webhook deliverer of this process (server.ts), woken by changes through the API. */
  webhooks?: Deliverer;
}

/** Assembles the HTTP app from the feature plugins. No listening, no signals: see server.ts. */
export function buildApp(core: Core, options: AppOptions = {}) {
  const isPublic = core.config.metricsPublic;
  const limits = core.config.rateLimit;
  const authOptions = {
    storage: core.storage,
    root: options.root,
    protectedPaths: isPublic ? ["/mcp"] : ["/metrics", "/mcp"],
  };
  // Authentication runs in the pipeline's hook; the plugin adds the `permission` and `namespace` macros.
  const authPlugin = auth((request) => requestInfo(request)?.key as KeyRecord | undefined, core.storage);
  const requests = new RequestMetrics();
  // POST /mcp runs its tools through the app's own REST routes; the app exists by the time it is called.
  let self: { handle(request: Request): Promise<Response> } | undefined;
  let routes: () => RouteInfo[] = () => [];
  // Request id, 401, 429, 405, strict query, no body on GET: one hook; log line and metrics: one hook.
  const requestPipeline = pipeline({
    logger: core.logger,
    authenticate: authenticator(authOptions),
    rateLimit: limits,
    routes: () => routes(),
    metrics: requests,
    repeatableQuery: { "*": ["tag"], "/v1/export": ["namespace"] },
  });
  // The raw store is also served outside Elysia's hooks when listening (http/direct.ts).
  const direct = requestPipeline.direct([directStore(core)], (request) => self!.handle(request));
  const app = new Elysia({ normalize: false, aot: true, serve: { routes: direct } })
    .use(requestPipeline.hooks)
    .use(errorHandler(core.logger, [{ paths: isMem0Path, body: mem0ErrorBody }]))
    .use(
      jsonBody({
        maxBytes: maxBodyBytes,
        freeForm: ["metadata", "params.arguments.metadata"],
        bodylessPost: /^\/v1\/webhooks\/[^/]+\/rotate-secret$/,
      }),
    )
    .use(authPlugin)
    .use(healthRoutes(core))
    .use(
      metricsRoutes({
        core,
        authPlugin,
        public: isPublic,
        modelStats: options.modelStats,
        embedStats: options.embedStats,
        requests,
        extra: [
          () => webhookMetrics(core, options.webhooks),
          async () => consolidationMetrics(),
          async () => rerankMetrics(),
        ],
      }),
    )
    .use(openapiRoutes())
    .use(uiRoutes())
    .use(memoryRoutes(core, authPlugin, options.smartStore))
    .use(searchRoutes(core, authPlugin))
    .use(contextRoutes(core, authPlugin))
    .use(auditRoutes(core, authPlugin))
    .use(revertRoutes(core, authPlugin))
    .use(consolidateRoutes(core, authPlugin))
    // Before browse: mem0's GET /v1/entities/ answers memd's GET /v1/entities too (see mem0/index.ts).
    .use(mem0Routes(core, authPlugin, options.smartStore))
    .use(browseRoutes(core, authPlugin))
    .use(streamRoutes(core, authPlugin, options.streams ?? new StreamHub()))
    .use(keyRoutes(core, authPlugin, () => options.webhooks?.keysChanged()))
    .use(transferRoutes(core, authPlugin))
    .use(webhookRoutes(core, authPlugin, options.webhooks, options.root))
    .use(mcpRoutes(authPlugin, (request) => self!.handle(request)));
  self = app;
  routes = () => app.routes;
  return app;
}

export type App = ReturnType<typeof buildApp>;
