import { Elysia } from "elysia";
import { auditRoutes } from "./audit/index";
import type { Core } from "./core";
import { errorHandler } from "./http/error-handler";
import { jsonBody } from "./http/json-body";
import { requestLog } from "./http/request-log";
import { auth, keyOf } from "./keys/auth";
import type { KeyRecord } from "./keys/model";
import { memoryRoutes, type SmartStore } from "./memory/index";

export interface AppOptions {
  root?: KeyRecord;
  smartStore?: SmartStore;
}

/** Assembles the HTTP app from the feature plugins. No listening, no signals: see server.ts. */
export function buildApp(core: Core, options: AppOptions = {}) {
  const authPlugin = auth({ store: core.store, root: options.root });
  return new Elysia({ normalize: false, aot: true })
    .use(requestLog(core.logger, (r) => keyOf(r)?.id))
    .use(errorHandler(core.logger))
    .use(jsonBody({ maxBytes: 1024 * 1024 }))
    .use(authPlugin)
    .get("/healthz", () => ({ status: "ok" }), { detail: { summary: "Liveness; no key needed" } })
    .use(memoryRoutes(core, authPlugin, options.smartStore))
    .use(auditRoutes(core, authPlugin));
}

export type App = ReturnType<typeof buildApp>;
