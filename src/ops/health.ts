import { Elysia } from "elysia";
import type { Core } from "../core";
import type { Upkeep } from "../storage/storage";

/** Why the store cannot take writes now, or undefined when it can. Cheap enough for every probe. */
export function notReadyReason(core: Core<Upkeep>): Promise<string | undefined> {
  return core.storage.notReadyReason();
}

/**
 * `GET /healthz` (the process answers) and `GET /readyz` (the store is open and writable); no key
 * needed. `GET /health` answers as /healthz: the name a newcomer tries first.
 */
export const healthRoutes = (core: Core<Upkeep>) =>
  new Elysia({ name: "health" })
    .get("/healthz", () => ({ status: "ok" }), { detail: { summary: "Liveness; no key needed", security: [] } })
    .get("/health", () => ({ status: "ok" }), {
      detail: { summary: "Liveness, as /healthz; no key needed", security: [] },
    })
    .get(
      "/readyz",
      async ({ set }) => {
        const reason = await notReadyReason(core);
        if (reason === undefined) return { status: "ready" };
        set.status = 503;
        return { status: "not_ready", error: { code: "not_ready", message: reason } };
      },
      { detail: { summary: "Readiness: the store is open and writable; 503 when not. No key needed", security: [] } },
    );
