import { accessSync, constants } from "node:fs";
import { Elysia } from "elysia";
import type { Core } from "../core";

/** Why the store cannot take writes now, or undefined when it can. Cheap enough for every probe. */
export function notReadyReason(core: Core): string | undefined {
  const { env, dbs } = core.store;
  // isOperational() is in lmdb-js (status "open") but missing from its type declarations.
  if (!(env as unknown as { isOperational(): boolean }).isOperational()) return "the store is not open";
  try {
    // A real read transaction: fails if the environment is broken underneath us.
    dbs.events.getKeys({ reverse: true, limit: 1 }).asArray;
    accessSync(core.config.dataDir, constants.W_OK);
  } catch (e) {
    return `the store cannot be read or written: ${(e as Error).message}`;
  }
  const s = env.getStats() as { pageSize: number; lastPageNumber: number; mapSize: number };
  // Writes start failing with MDB_MAP_FULL near the end of the map; say so before they do.
  if ((s.lastPageNumber + 1) * s.pageSize > s.mapSize * 0.99) return "the store is full; raise --map-size-mb";
  return undefined;
}

/** `GET /healthz` (the process answers) and `GET /readyz` (the store is open and writable); no key needed. */
export const healthRoutes = (core: Core) =>
  new Elysia({ name: "health" })
    .get("/healthz", () => ({ status: "ok" }), { detail: { summary: "Liveness; no key needed", security: [] } })
    .get(
      "/readyz",
      ({ set }) => {
        const reason = notReadyReason(core);
        if (reason === undefined) return { status: "ready" };
        set.status = 503;
        return { status: "not_ready", error: { code: "not_ready", message: reason } };
      },
      { detail: { summary: "Readiness: the store is open and writable; 503 when not. No key needed", security: [] } },
    );
