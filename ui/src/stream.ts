// The live change stream (GET /v1/memory/events/stream) read with fetch, because EventSource
// cannot send an Authorization header. Resumes after a drop with Last-Event-ID, so nothing is
// missed or repeated; reports its state so the page can show "reconnecting".
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

/** Parses a text/event-stream body into messages (id, event, data), until it ends. */
async function readEvents(
  body: ReadableStream<Uint8Array>,
  onMessage: (id: string, event: string, data: string) => void,
) {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += decoder.decode(value, { stream: true }).replace(/\r\n?/g, "\n");
    let end = buffer.indexOf("\n\n");
    while (end !== -1) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      let id = "";
      let event = "message";
      const data: string[] = [];
      for (const line of block.split("\n")) {
        if (line.startsWith(":")) continue;
        const colon = line.indexOf(":");
        const field = colon === -1 ? line : line.slice(0, colon);
        const v = colon === -1 ? "" : line.slice(colon + 1).replace(/^ /, "");
        if (field === "id") id = v;
        else if (field === "event") event = v;
        else if (field === "data") data.push(v);
      }
      if (id || data.length) onMessage(id, event, data.join("\n"));
      end = buffer.indexOf("\n\n");
    }
  }
}
