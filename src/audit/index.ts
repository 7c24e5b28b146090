import { Elysia, t } from "elysia";
import { limits } from "../config/limits";
import type { Core } from "../core";
import { queryLimit } from "../http/query";
import type { auth } from "../keys/auth";
import { ApiError, invalidField } from "../wire/errors";
import { jsonAnswer } from "../wire/schemas";
import { isoTime } from "../wire/time";
import { summarizeDiff } from "./diff";
import { AuditEvent, DiffRequest, DiffResponse, EventsQuery } from "./model";
import { parseSince, toAuditEvent } from "./service";

/** Routes of the audit feature: the diff (changelog) and the raw events. */
export const auditRoutes = (core: Core, authPlugin: ReturnType<typeof auth>) =>
  new Elysia({ name: "audit" })
    .use(authPlugin)
    .post(
      "/v1/memory/diff",
      async ({ body }) => {
        const afterMs = body.since == null ? -1 : parseSince(body.since);
        const limit = body.limit ?? limits.diffDefault;
        const scope = { namespace: body.namespace, entity: body.entity };
        // One extra event tells whether there is more after this page.
        const events = await core.storage.eventsAfter(scope, afterMs, limit + 1);
        const hasMore = events.length > limit;
        if (hasMore) events.pop();
        const last = events.at(-1);
        return {
          ...summarizeDiff(events),
          since: body.since ?? null,
          hasMore,
          nextSince: last ? isoTime(last.atMs) : (body.since ?? null),
        };
      },
      {
        permission: "read",
        namespace: "body",
        body: DiffRequest,
        detail: {
          summary: "What changed since a time",
          description: "Reads only the audit trail; no model call.",
          responses: jsonAnswer(DiffResponse),
        },
      },
    )
    .get(
      "/v1/memory/events",
      async ({ query, memory: m }) => {
        const limit = queryLimit(query.limit, limits.pageMax, limits.eventsDefault);
        if (query.memoryId !== undefined) {
          // Unknown, or outside the key's namespaces (then `memory` is undefined), or not in the asked
          // namespace: one answer, so ids cannot be probed.
          if (!m || (query.namespace !== undefined && m.namespace !== query.namespace))
            throw new ApiError("not_found", "no memory with that id");
          if (query.entity !== undefined && query.entity !== m.entity) return [];
          return (await core.storage.newestEvents({ namespace: m.namespace, memoryId: m.id }, limit)).map(toAuditEvent);
        }
        if (query.namespace === undefined) throw invalidField("namespace", "is required unless memoryId is given");
        const scope = { namespace: query.namespace, entity: query.entity };
        return (await core.storage.newestEvents(scope, limit)).map(toAuditEvent);
      },
      {
        permission: "read",
        namespace: "query",
        memory: "query.memoryId",
        query: EventsQuery,
        detail: { summary: "Audit events, newest first", responses: jsonAnswer(t.Array(AuditEvent)) },
      },
    );
