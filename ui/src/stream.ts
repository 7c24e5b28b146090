// The live change stream (GET /v1/memory/events/stream) read with fetch, because EventSource
// cannot send an Authorization header. Resumes after a drop with Last-Event-ID, so nothing is
// missed or repeated; reports its state so the page can show "reconnecting".
import { sseMessages } from "../../client/src/sse";
import { type AuditEvent, authHeaders, errorOf } from "./api";

export type StreamState = "connecting" | "live" | "reconnecting" | "stopped";

export interface StreamHandlers {
  onEvent(e: AuditEvent): void;
  onState(s: StreamState): void;
  onError(e: Error): void;
}

/** Opens the stream of `namespace` (and `entity`); returns a function that closes it. */
export function openStream(namespace: string, entity: string | undefined, h: StreamHandlers): () => void {
  const ctl = new AbortController();
  let last: string | undefined;
  let stopped = false;
  const params = new URLSearchParams({ namespace });
  if (entity !== undefined) params.set("entity", entity);
  const url = `/v1/memory/events/stream?${params}`;

  const run = async () => {
    let delay = 500;
    h.onState("connecting");
    while (!stopped) {
      try {
        const headers = authHeaders(last ? { "last-event-id": last, accept: "text/event-stream" } : {});
        const res = await fetch(url, { headers, signal: ctl.signal, cache: "no-store", credentials: "omit" });
        if (!res.ok || !res.body) {
          const err = await errorOf(res);
          h.onError(err);
          // A refused key or namespace will not get better by retrying.
          if (res.status === 401 || res.status === 403 || res.status === 400) {
            h.onState("stopped");
            return;
          }
          throw err;
        }
        h.onState("live");
        delay = 500;
        await readEvents(res.body, (id, event, data) => {
          if (id) last = id;
          if (event === "memory") h.onEvent(JSON.parse(data) as AuditEvent);
        });
      } catch {
        if (stopped) return;
      }
      if (stopped) return;
      h.onState("reconnecting");
      await new Promise((r) => setTimeout(r, delay));
      delay = Math.min(delay * 2, 5000);
    }
  };
  run();
  return () => {
    stopped = true;
    ctl.abort();
    h.onState("stopped");
  };
}

/** Calls `onMessage` for each message of a text/event-stream body that has an id or data, until it ends. */
async function readEvents(
  body: ReadableStream<Uint8Array>,
  onMessage: (id: string, event: string, data: string) => void,
) {
  for await (const m of sseMessages(body))
    if (m.id || m.data !== undefined) onMessage(m.id ?? "", m.event ?? "message", m.data ?? "");
}
