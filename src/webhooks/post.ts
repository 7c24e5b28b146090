// One webhook POST over a socket of our own: connect to the address resolveTarget checked (so a
// name cannot resolve to another address between the check and the connection), HTTP/1.1, time
// limits on the connection and on the answer, no redirect followed, and at most `maxAnswerBytes`
// of the answer read. A connection whose answer came whole (by Content-Length, within the cap) is
// kept for the next POST to the same address: a connection per event cost more than the event.
// http goes through Bun.connect (about half the CPU of node:net per POST), https through node:tls.

import type { Socket } from "node:net";
import { connect as tlsConnect } from "node:tls";
import type { Socket as BunSocket, SocketHandler } from "bun";
import { hostOf, resolveTarget } from "./address";

export interface PostOptions {
  connectTimeoutMs: number;
  /** From the request sent to the answer's end (or its cap). */
  answerTimeoutMs: number;
  allowPrivate: boolean;
  maxAnswerBytes: number;
  signal?: AbortSignal;
  /**
   * Asked once the connection is made, right before the request is written (a name's lookup and
   * a TLS handshake may take long): false writes nothing and answers `stale`, the connection kept.
   */
  stillCurrent?: () => boolean;
}

/** What became of a POST: the status when one came, else why not; `answer` is the (capped) body. */
export interface PostResult {
  status: number | null;
  ok: boolean;
  error: string | null;
  answer: string;
  /** Nothing was sent: `stillCurrent` said no. */
  stale?: true;
}

const headerEnd = Buffer.from("\r\n\r\n");
/** At most this much of an answer's status line and headers is read (a longer head is a failure). */
const maxHeadBytes = 16 * 1024;
/** A chunked body's framing (chunk sizes, extensions) may take at most this many times its data. */
const maxFraming = 16;

/** How late a time limit's timer may fire before it counts as this thread not having run. */
const lateMs = 20;

/**
 * Calls `expire` once `ms` have passed, and answers how to cancel it. A timer that fires late
 * means this thread was not running (a busy machine; the delivery thread is in the idle class),
 * and a timer due runs before the socket's events that came meanwhile: it waits one more turn of
 * the event loop (once, so a thread kept from running still times out), and an answer that came
 * in time is read first: the thread's own wait is not the receiver's.
 */
function timeLimit(ms: number, expire: () => void): () => void {
  const due = performance.now() + ms;
  let timer = setTimeout(() => {
    if (performance.now() - due <= lateMs) expire();
    else timer = setTimeout(expire, 1);
  }, ms);
  return () => clearTimeout(timer);
}

/** Idle kept connections per address, port, scheme and host name; closed after idleMs unused. */
const idle = new Map<string, Link[]>();
const idleMs = 30_000;
const maxIdlePerTarget = 4;

/** What an exchange in progress does with its socket's events. */
interface Exchange {
  data(chunk: Buffer): void;
  /** The socket ended, closed or failed (with the error when there was one). */
  gone(e?: NodeJS.ErrnoException): void;
}

/** A connection, as an exchange and the pool use it. */
abstract class Link {
  current: Exchange | undefined;
  key = "";
  abstract write(data: string): void;
  abstract destroy(): void;
  abstract get alive(): boolean;
  /** Into the pool (closed after idleMs unused, not keeping the process alive), or out of it. */
  abstract idle(on: boolean): void;

  /** The socket ended, closed or failed: the exchange in progress hears of it; in the pool, it is dropped. */
  gone(e?: NodeJS.ErrnoException) {
    const x = this.current;
    if (x) x.gone(e);
    else this.drop();
  }

  /** Closes it and takes it out of the pool. */
  drop() {
    this.destroy();
    const l = idle.get(this.key);
    if (l) {
      const i = l.indexOf(this);
      if (i >= 0) l.splice(i, 1);
      if (l.length === 0) idle.delete(this.key);
    }
  }
}

/**
 * A node:tls socket with its listeners set once, for its whole life: they pass its events to the
 * exchange in progress, or (while it waits in the pool) drop it. So a kept connection costs no
 * listener changes per POST.
 */
class Conn extends Link {
  constructor(readonly socket: Socket) {
    super();
    socket.on("data", (c: Buffer) => this.current?.data(c));
    socket.on("end", () => this.gone());
    socket.on("close", () => this.gone());
    socket.on("error", (e: NodeJS.ErrnoException) => this.gone(e));
    // Idle too long in the pool: closed (an exchange has its own time limit).
    socket.on("timeout", () => {
      if (!this.current) this.drop();
    });
  }
  write(data: string) {
    this.socket.write(data);
  }
  destroy() {
    this.socket.destroy();
  }
  get alive() {
    return !this.socket.destroyed && this.socket.writable;
  }
  idle(on: boolean) {
    this.socket.setTimeout(on ? idleMs : 0);
    if (on) this.socket.unref();
    else this.socket.ref();
  }
}

/** A Bun.connect socket (http): its handlers, shared by all, pass its events to it. */
class BunConn extends Link {
  socket: BunSocket<BunConn> | undefined;
  private closed = false;
  /** What the socket did not take yet (written on drain). */
  private pending: Buffer | undefined;
  write(data: string) {
    // Mostly taken whole: the bytes are copied for the rest only.
    const n = this.socket?.write(data) ?? -1;
    if (n < 0) this.gone(Object.assign(new Error("the connection closed"), { code: "ECONNRESET" }));
    else if (n < Buffer.byteLength(data)) this.pending = Buffer.from(data).subarray(n);
  }
  private send(buf: Buffer) {
    const n = this.socket?.write(buf) ?? -1;
    if (n < 0) this.gone(Object.assign(new Error("the connection closed"), { code: "ECONNRESET" }));
    else this.pending = n < buf.byteLength ? buf.subarray(n) : undefined;
  }
  drained() {
    const p = this.pending;
    if (p) this.send(p);
  }
  destroy() {
    this.closed = true;
    this.socket?.terminate();
  }
  get alive() {
    return !this.closed && this.socket !== undefined && this.socket.readyState > 0;
  }
  idle(on: boolean) {
    this.socket?.timeout(on ? idleMs / 1000 : 0);
    if (on) this.socket?.unref();
    else this.socket?.ref();
  }
  ended(e?: NodeJS.ErrnoException) {
    this.closed = true;
    this.gone(e);
  }
}

const bunHandlers: SocketHandler<BunConn> = {
  data: (s, chunk) => s.data.current?.data(chunk as Buffer),
  drain: (s) => s.data.drained(),
  end: (s) => s.data.ended(),
  close: (s, e) => s.data.ended(e as NodeJS.ErrnoException | undefined),
  error: (s, e) => s.data.ended(e as NodeJS.ErrnoException),
  // Idle too long in the pool: closed (an exchange has its own time limit).
  timeout: (s) => {
    if (!s.data.current) s.data.drop();
  },
};

/** A new http connection to the checked address, or why not (within the connect time limit). */
async function bunConnect(address: string, port: number, o: PostOptions): Promise<BunConn | PostResult> {
  const conn = new BunConn();
  let cancel: (() => void) | undefined;
  const late = new Promise<"late">((resolve) => {
    cancel = timeLimit(o.connectTimeoutMs, () => resolve("late"));
  });
  const connecting = Bun.connect({ hostname: address, port, data: conn, socket: bunHandlers }).then(
    (s) => {
      conn.socket = s;
      return conn;
    },
    (e: NodeJS.ErrnoException) => failed(e.code ? `${e.code}: ${e.message}` : e.message),
  );
  let onAbort: (() => void) | undefined;
  const stopped = new Promise<"stopped">((resolve) => {
    onAbort = () => resolve("stopped");
    o.signal?.addEventListener("abort", onAbort, { once: true });
  });
  const r = await Promise.race([connecting, late, stopped]);
  cancel?.();
  if (onAbort) o.signal?.removeEventListener("abort", onAbort);
  if (r !== "late" && r !== "stopped") return r;
  void connecting.then((c) => c instanceof BunConn && c.destroy());
  return failed(r === "stopped" ? "stopped" : `no connection within ${o.connectTimeoutMs} ms`);
}

function keep(key: string, c: Link) {
  const list = idle.get(key) ?? [];
  if (list.length >= maxIdlePerTarget) return c.destroy();
  c.key = key;
  c.idle(true);
  list.push(c);
  idle.set(key, list);
}

function take(key: string): Link | undefined {
  const list = idle.get(key);
  while (list && list.length > 0) {
    const c = list.pop()!;
    if (list.length === 0) idle.delete(key);
    c.idle(false);
    if (c.alive) return c;
    c.destroy();
  }
  return undefined;
}

/** POSTs `body` (JSON) to `url` with `headers`; never throws. */
export async function postWebhook(
  url: URL,
  headers: Record<string, string>,
  body: string,
  o: PostOptions,
): Promise<PostResult> {
  let target: { address: string; family: number };
  try {
    target = await resolveTarget(url, o.allowPrivate);
  } catch (e) {
    const err = e as NodeJS.ErrnoException;
    return failed(err.code ? `cannot resolve ${url.hostname}: ${err.code}` : err.message);
  }
  if (o.signal?.aborted) return failed("stopped");
  const https = url.protocol === "https:";
  const port = Number(url.port || (https ? 443 : 80));
  const host = hostOf(url);
  const key = `${url.protocol}//${target.address}:${port}/${host}`;
  let head = `POST ${url.pathname}${url.search} HTTP/1.1\r\nHost: ${url.host}\r\nUser-Agent: memd-webhooks\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n`;
  for (const k in headers) head += `${k}: ${headers[k]}\r\n`;
  const request = `${head}\r\n${body}`;
  const kept = take(key);
  if (kept) {
    const r = await exchange(kept, request, o);
    // A kept connection the receiver had closed meanwhile: it closed with nothing back, so send on
    // a new one. Not after the time limit: a receiver that is slow to answer is not sent it twice.
    // (at worst a repeat, with the same webhook-id).
    if (!r.nothing || r.result.stale) return finish(key, r);
  }
  if (!https) {
    const conn = await bunConnect(target.address, port, o);
    if (!(conn instanceof BunConn)) return conn;
    if (o.signal?.aborted) {
      conn.destroy();
      return failed("stopped");
    }
    return finish(key, await exchange(conn, request, o));
  }
  const socket = tlsConnect({ host: target.address, port, servername: target.address === host ? undefined : host });
  return finish(key, await exchange(new Conn(socket), request, o, "secureConnect"));
}

const failed = (error: string): PostResult => ({ status: null, ok: false, error, answer: "" });

const chunkedAnswer = /\r\ntransfer-encoding:[^\r]*chunked/i;

/**
 * A chunked body as far as it came: its data, and whether its last chunk (size 0) came. A size
 * line that is not hex ends it: the answer is taken as it is (only a failure's start is kept).
 */
function dechunk(raw: Buffer): { data: Buffer; ended: boolean } {
  const parts: Buffer[] = [];
  let at = 0;
  for (;;) {
    const eol = raw.indexOf("\r\n", at);
    if (eol < 0) return { data: Buffer.concat(parts), ended: false };
    // Number.parseInt stops at a chunk extension (";name=value").
    const size = Number.parseInt(raw.subarray(at, eol).toString("latin1"), 16);
    if (!(size > 0)) return { data: Buffer.concat(parts), ended: true };
    const start = eol + 2;
    parts.push(raw.subarray(start, Math.min(start + size, raw.byteLength)));
    at = start + size + 2;
    if (at > raw.byteLength) return { data: Buffer.concat(parts), ended: false };
  }
}

function finish(key: string, r: Exchanged): PostResult {
  if (r.reusable) keep(key, r.conn);
  else r.conn.destroy();
  return r.result;
}

interface Exchanged {
  result: PostResult;
  conn: Link;
  /** The whole answer was read and the receiver keeps the connection open. */
  reusable: boolean;
  /** The connection closed or failed before a byte came back (a kept connection found closed). */
  nothing: boolean;
}

/** Sends `request` on `conn` (once a node:tls socket connects, when `connecting` is given) and reads the answer. */
function exchange(conn: Link, request: string, o: PostOptions, connecting?: "secureConnect"): Promise<Exchanged> {
  const socket = conn instanceof Conn ? conn.socket : undefined;
  return new Promise<Exchanged>((resolve) => {
    let done = false;
    let cancel: (() => void) | undefined;
    let all: Buffer | undefined;
    const settle = (result: PostResult, reusable = false, closed = false) => {
      if (done) return;
      done = true;
      cancel?.();
      o.signal?.removeEventListener("abort", onAbort);
      if (connecting) socket?.removeListener(connecting, onConnect);
      conn.current = undefined;
      resolve({ result, conn, reusable, nothing: closed && all === undefined && result.status === null });
    };
    const onAbort = () => settle(failed("stopped"));
    o.signal?.addEventListener("abort", onAbort);
    /** The answer as far as it came, or undefined while the status line and headers are not all in. */
    const parse = (complete: boolean): [PostResult, boolean] | undefined => {
      if (all === undefined)
        return complete ? [failed("the connection closed before an HTTP answer"), false] : undefined;
      const end = all.indexOf(headerEnd);
      if (end < 0 && all.byteLength > maxHeadBytes)
        return [failed(`no end of the answer's headers within ${maxHeadBytes} bytes`), false];
      if (end < 0) return complete ? [failed("the connection closed before an HTTP answer"), false] : undefined;
      const head = all.subarray(0, end).toString("latin1");
      const m = /^HTTP\/1\.[01] (\d{3})/.exec(head);
      if (!m) return [failed("not an HTTP answer"), false];
      const status = Number(m[1]);
      // An interim answer (100 Continue, 103 Early Hints): the answer comes after it.
      if (status < 200 && status !== 101) {
        all = all.subarray(end + 4);
        return parse(complete);
      }
      const lengthMatch = /\r\ncontent-length:\s*(\d+)/i.exec(head);
      const length = lengthMatch ? Number(lengthMatch[1]) : undefined;
      const bodyIn = all.byteLength - end - 4;
      // A body sent in chunks (no length) is whole at its last chunk; these statuses have none.
      const chunks = length === undefined && chunkedAnswer.test(head) ? dechunk(all.subarray(end + 4)) : undefined;
      const noBody = status === 101 || status === 204 || status === 304;
      const whole = noBody || (chunks ? chunks.ended : length !== undefined && bodyIn >= length);
      const capped =
        (chunks ? chunks.data.byteLength : bodyIn) >= o.maxAnswerBytes || bodyIn >= maxFraming * o.maxAnswerBytes;
      const ok = status >= 200 && status < 300;
      // Done when the body is whole, capped, or the connection ended; a success without a length needs no body.
      if (!whole && !capped && !complete && !(ok && length === undefined)) return undefined;
      const answer = (chunks ? chunks.data : all.subarray(end + 4)).subarray(0, o.maxAnswerBytes).toString("utf8");
      const error = ok
        ? null
        : status >= 300 && status < 400
          ? `answered ${status}; redirects are not followed`
          : `answered ${status}`;
      const reusable =
        whole && bodyIn === length && length <= o.maxAnswerBytes && !complete && !/\r\nconnection:\s*close/i.test(head);
      return [{ status, ok, error, answer }, reusable];
    };
    conn.current = {
      data(chunk) {
        all = all === undefined ? chunk : Buffer.concat([all, chunk]);
        const r = parse(false);
        if (r) settle(r[0], r[1]);
      },
      gone(e) {
        if (e) settle(failed(e.code ? `${e.code}: ${e.message}` : e.message), false, true);
        else {
          const r = parse(true)!;
          settle(r[0], false, true);
        }
      },
    };
    const onConnect = () => {
      cancel?.();
      if (o.stillCurrent && !o.stillCurrent()) return settle({ ...failed("stale"), stale: true }, true);
      cancel = timeLimit(o.answerTimeoutMs, () => settle(failed(`no answer within ${o.answerTimeoutMs} ms`)));
      conn.write(request);
    };
    if (connecting && socket) {
      cancel = timeLimit(o.connectTimeoutMs, () => settle(failed(`no connection within ${o.connectTimeoutMs} ms`)));
      socket.once(connecting, onConnect);
    } else onConnect();
  });
}
