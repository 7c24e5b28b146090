import { Elysia } from "elysia";
import type { Core } from "../core";
import type { auth } from "../keys/auth";
import { stillValid } from "../keys/service";
import { invalidField } from "../wire/errors";
import { StreamQuery } from "./model";
import { parseSince } from "./service";
import {
  CursorCodec,
  defaultStreamOptions,
  eventStream,
  type StreamHub,
  type StreamOptions,
  streamStart,
} from "./stream-service";

/** Seconds a stream that was ended (overflow, shutdown) may take to drain before the socket is cut. */
const drainSeconds = 60;

/**
 * `GET /v1/memory/events/stream`: the audit trail of a namespace (or entity) as Server-Sent
 * Events, oldest first; replay from `Last-Event-ID`, `after=` or `since=`, then live.
 */
export const streamRoutes = (
  core: Core,
  authPlugin: ReturnType<typeof auth>,
  hub: StreamHub,
  options: Partial<StreamOptions> = {},
) => {
  const opts = { ...defaultStreamOptions, keepaliveMs: core.config.streamKeepaliveMs, ...options };
  return new Elysia({ name: "audit-stream" }).use(authPlugin).get(
    "/v1/memory/events/stream",
    async ({ query, request, headers, apiKey, server }) => {
      const scope = { namespace: query.namespace, entity: query.entity };
      const codec = new CursorCodec(query.namespace);
      // A reconnecting EventSource repeats the URL (with its after= or since=) and adds Last-Event-ID: that wins.
      const lastId = headers["last-event-id"];
      if (query.after !== undefined && query.since !== undefined)
        throw invalidField("after", "give after or since, not both");
      const afterMs = lastId
        ? codec.decode(lastId, "Last-Event-ID")
        : query.after !== undefined
          ? codec.decode(query.after, "after")
          : query.since !== undefined
            ? parseSince(query.since)
            : await streamStart(core, scope);
      // Bun's idle timeout would cut a quiet stream between keepalives; after an end, give the client time to drain.
      server?.timeout(request, 0);
      const body = eventStream(
        core,
        scope,
        afterMs,
        hub,
        opts,
        (why) => {
          if (why === "overflow" || why === "shutdown" || why === "unauthorized")
            server?.timeout(request, drainSeconds);
        },
        () => stillValid(core.storage, apiKey),
      );
      return new Response(body, {
        headers: {
          "content-type": "text/event-stream; charset=utf-8",
          "cache-control": "no-cache, no-transform",
          "x-accel-buffering": "no",
        },
      });
    },
    {
      permission: "read",
      namespace: "query",
      query: StreamQuery,
      detail: {
        summary: "Live change stream (Server-Sent Events)",
        description:
          "Each message: `id:` an opaque cursor, `event: memory`, `data:` the event as GET /v1/memory/events shows it. " +
          "Resume with Last-Event-ID or after=; since= starts from a time; without either, only new events. " +
          "A `: keepalive` comment every 15 s. A consumer that falls 10,000 events behind gets `event: overflow` " +
          "with the cursor to resume from, and the stream ends.",
        responses: {
          200: { description: "text/event-stream", content: { "text/event-stream": { schema: { type: "string" } } } },
        },
      },
    },
  );
};
