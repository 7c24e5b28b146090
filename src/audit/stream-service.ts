import type { Core } from "../core";
import type { EventScope } from "../storage/storage";
import { invalidField } from "../wire/errors";
import type { EventRecord } from "./model";
import { toAuditEvent } from "./service";

/**
 * The live change stream: Server-Sent Events of a scope's audit trail, oldest first, replay then
 * live. Reads go only through `eventsAfter` (awaited), so the same loop runs on any storage backend.
 *
 * Why a cursor of `atMs` is exact: within one namespace event times are unique and strictly
 * increasing in commit order (see EventClock), so "events after T" never skips or repeats one,
 * whether the reader is catching up or waiting for the next commit.
 */

export interface StreamOptions {
  /** A `: keepalive` comment this often, so proxies do not close an idle stream. */
  keepaliveMs: number;
  /** Read the trail at least this often even without a local ping (events of other replicas). */
  pollMs: number;
  /** Events read per storage call. */
  pageSize: number;
  /** Events queued for a consumer that is not reading, before it is cut off with `overflow`. */
  maxBufferedEvents: number;
  /** The same bound in bytes, whichever fills first (a few large events must not hold gigabytes). */
  maxBufferedBytes: number;
}

export const defaultStreamOptions: StreamOptions = {
  keepaliveMs: 15_000,
  pollMs: 500,
  pageSize: 500,
  maxBufferedEvents: 10_000,
  maxBufferedBytes: 8 * 1024 * 1024,
};

/** Why a stream ended, for the route (to cut a consumer that never drains) and the log. */
export type StreamEnd = "overflow" | "shutdown" | "cancelled" | "error" | "unauthorized";

/** Open streams of one server, so that stopping the server can end them all. */
export class StreamHub {
  private readonly open = new Set<() => void>();

  /** Registers a stream's close function; returns the unregister. */
  add(close: () => void): () => void {
    this.open.add(close);
    return () => this.open.delete(close);
  }

  /** Ends every open stream cleanly (what was queued is still sent); returns how many. */
  closeAll(): number {
    const all = [...this.open];
    this.open.clear();
    for (const close of all) close();
    return all.length;
  }

  get size() {
    return this.open.size;
  }
}

const tagOf = (namespace: string) => new Bun.CryptoHasher("sha256").update(namespace).digest("hex").slice(0, 12);

/**
 * An opaque stream cursor: the event time, bound to its namespace by a short hash, so a cursor
 * from another namespace is refused instead of silently meaning something else there.
 */
export class CursorCodec {
  private readonly tag: string;
  constructor(readonly namespace: string) {
    this.tag = tagOf(namespace);
  }

  encode(atMs: number): string {
    return Buffer.from(`${atMs}.${this.tag}`).toString("base64url");
  }

  /** The event time of a cursor, or a 400 naming `field`. */
  decode(raw: string, field: string): number {
    const m = /^[A-Za-z0-9_-]{1,64}$/.test(raw)
      ? /^(-1|\d{1,15})\.([0-9a-f]{12})$/.exec(Buffer.from(raw, "base64url").toString())
      : null;
    if (!m) throw invalidField(field, "is not a stream cursor");
    if (m[2] !== this.tag) throw invalidField(field, "is a cursor of another namespace");
    return Number(m[1]);
  }
}

/** Where a new stream starts without a cursor or time: after the newest event of the scope (live only). */
export async function streamStart(core: Core, scope: EventScope): Promise<number> {
  const [newest] = await core.storage.newestEvents(scope, 1);
  return newest ? newest.atMs : -1;
}

const encoder = new TextEncoder();

/**
 * A ReadableStream of SSE messages for `scope`, starting strictly after `afterMs`.
 *
 * Memory is bounded by pull: events are read from storage only while the stream's queue has room
 * (the HTTP server stops pulling when the socket does not drain), so a replay of any length runs at
 * the consumer's pace. Once the stream has caught up, a full queue with more events waiting means the
 * consumer cannot keep up with the writers: the stream ends with `event: overflow` carrying the cursor
 * of the last event queued, which the consumer receives after everything before it.
 */
export function eventStream(
  core: Core,
  scope: { namespace: string; entity?: string },
  afterMs: number,
  hub: StreamHub,
  options: StreamOptions = defaultStreamOptions,
  onEnd: (why: StreamEnd) => void = () => {},
  /** Whether the caller's key still holds (not revoked, not expired): asked before each read. */
  allowed: () => Promise<boolean> = async () => true,
): ReadableStream<Uint8Array> {
  const codec = new CursorCodec(scope.namespace);
  const { keepaliveMs, pollMs, pageSize, maxBufferedEvents, maxBufferedBytes } = options;
  // A chunk's share of the buffer: by events or by bytes, whichever is larger. Full at 1.
  const weights = new WeakMap<Uint8Array, number>();
  let controller!: ReadableStreamDefaultController<Uint8Array>;
  let cursor = afterMs;
  let closed = false;
  /** Caught up with the trail at least once: from then on a full buffer is a consumer that cannot keep up. */
  let live = false;
  let dirty = true;
  let wakeUp: (() => void) | undefined;
  const cleanups: (() => void)[] = [];

  const wake = () => {
    dirty = true;
    const w = wakeUp;
    wakeUp = undefined;
    w?.();
  };
  const room = () => controller.desiredSize ?? 0;
  const send = (text: string, events: number) => {
    const chunk = encoder.encode(text);
    weights.set(chunk, Math.max(events / maxBufferedEvents, chunk.byteLength / maxBufferedBytes));
    controller.enqueue(chunk);
  };
  const release = () => {
    closed = true;
    for (const c of cleanups.splice(0)) c();
    wake();
  };
  const end = (why: StreamEnd) => {
    if (closed) return;
    release();
    try {
      controller.close();
    } catch {}
    onEnd(why);
  };
  /** Waits for a ping, room in the queue, a stop or the poll interval, whichever comes first. */
  const idle = () =>
    new Promise<void>((resolve) => {
      const timer = setTimeout(wake, pollMs);
      wakeUp = () => {
        clearTimeout(timer);
        resolve();
      };
    });

  const format = (e: EventRecord) =>
    `id: ${codec.encode(e.atMs)}\nevent: memory\ndata: ${JSON.stringify(toAuditEvent(e))}\n\n`;

  async function run() {
    while (!closed) {
      if (!(await allowed())) {
        if (closed) return;
        send(
          `event: error\ndata: ${JSON.stringify({ code: "unauthorized", message: "the key was revoked or has expired" })}\n\n`,
          0,
        );
        return end("unauthorized");
      }
      if (room() <= 0) {
        // Full. While replaying, the backlog waits in storage and is read at the consumer's pace.
        // Once live, more events waiting behind a full buffer mean the consumer cannot keep up.
        dirty = false;
        const more = live ? await core.storage.eventsAfter(scope, cursor, 1) : [];
        if (closed) return;
        if (more.length > 0) {
          const c = codec.encode(cursor);
          send(
            `id: ${c}\nevent: overflow\ndata: ${JSON.stringify({ cursor: c, message: "consumer too slow; resume from this cursor" })}\n\n`,
            0,
          );
          return end("overflow");
        }
        if (!dirty) await idle();
        continue;
      }
      dirty = false;
      const limit = Math.max(1, Math.min(pageSize, Math.ceil(room() * maxBufferedEvents)));
      const page = await core.storage.eventsAfter(scope, cursor, limit);
      if (closed) return;
      if (page.length > 0) {
        // Committed is not yet durable (LMDB commits are visible before their group fsync): deliver
        // only what a crash cannot take back, or a subscriber's cursor could point past events that a
        // restarted server then hands out again under the same times.
        await core.storage.durable();
        if (closed) return;
        send(page.map(format).join(""), page.length);
        cursor = page[page.length - 1].atMs;
        continue;
      }
      live = true;
      if (!dirty) await idle();
    }
  }

  return new ReadableStream<Uint8Array>(
    {
      start(c) {
        controller = c;
        cleanups.push(
          core.notifier.subscribe(scope.namespace, wake),
          hub.add(() => end("shutdown")),
        );
        const keepalive = setInterval(() => {
          if (!closed && room() > 0) send(": keepalive\n\n", 0);
        }, keepaliveMs);
        cleanups.push(() => clearInterval(keepalive));
        // A first message sends the headers at once, so a client knows it is subscribed. Its `id:`
        // (no data, so no event is dispatched) is the starting cursor: an EventSource that drops
        // before the first event still resumes from exactly here, not from "now".
        send(`: memd event stream\nid: ${codec.encode(afterMs)}\n\n`, 0);
        run().catch((e) => {
          core.logger.error("event stream failed", { error: String((e as Error)?.stack ?? e) });
          end("error");
        });
      },
      pull: wake,
      cancel() {
        if (closed) return;
        release();
        onEnd("cancelled");
      },
    },
    { highWaterMark: 1, size: (chunk) => (chunk ? (weights.get(chunk) ?? 0) : 0) },
  );
}
