// Server-Sent Events for tests: the one parser of the wire format (client/src/sse.ts, which the
// client and the page use too), so the tests see exactly what the server sent (ids, event names,
// comments); and bounded waits.

import { type SseMessage, sseMessages } from "../client/src/sse";

export { type SseMessage, sseMessages };

/** Rejects after `ms` with `what` in the message: every wait in these tests is bounded. */
export function within<T>(ms: number, what: string, p: Promise<T>): Promise<T> {
  let timer: ReturnType<typeof setTimeout>;
  return Promise.race([
    p,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms: ${what}`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

export interface Subscriber {
  res: Response;
  /** `event: memory` messages received so far: cursor and parsed event. */
  events: { id: string; event: any }[];
  /** Every message, comments and overflow included. */
  all: SseMessage[];
  /** Resolves when `n` memory events have arrived (or the stream ended or was aborted). */
  until(n: number, ms?: number): Promise<void>;
  close(): void;
  done: Promise<void>;
}

/** Opens a stream and reads it in the background. */
export async function subscribe(
  url: string,
  key: string,
  query: string,
  headers: Record<string, string> = {},
): Promise<Subscriber> {
  const abort = new AbortController();
  const res = await fetch(`${url}/v1/memory/events/stream?${query}`, {
    headers: { authorization: `Bearer ${key}`, ...headers },
    signal: abort.signal,
  });
  if (res.status !== 200) throw new Error(`stream answered ${res.status}: ${await res.text()}`);
  const events: Subscriber["events"] = [];
  const all: SseMessage[] = [];
  let waiters: (() => void)[] = [];
  const notify = () => {
    const w = waiters;
    waiters = [];
    for (const f of w) f();
  };
  let ended = false;
  const done = (async () => {
    try {
      for await (const m of sseMessages(res.body!)) {
        all.push(m);
        if (m.event === "memory") events.push({ id: m.id!, event: JSON.parse(m.data!) });
        notify();
      }
    } catch (e) {
      if (!abort.signal.aborted) throw e;
    } finally {
      ended = true;
      notify();
    }
  })();
  return {
    res,
    events,
    all,
    done,
    async until(n, ms = 60_000) {
      await within(
        ms,
        `${n} events (have ${events.length})`,
        (async () => {
          while (events.length < n && !ended) await new Promise<void>((r) => waiters.push(r));
        })(),
      );
    },
    close: () => abort.abort(),
  };
}
