// One webhook POST over a socket of our own: connect to the address resolveTarget checked (so a
// name cannot resolve to another address between the check and the connection), HTTP/1.1, time
// limits on the connection and on the answer, no redirect followed, and at most `maxAnswerBytes`
// of the answer read. A connection whose answer came whole (by Content-Length, within the cap) is
// kept for the next POST to the same address: a connection per event cost more than the event.
import { type Socket, connect as tcpConnect } from "node:net";
import { connect as tlsConnect } from "node:tls";
import { hostOf, resolveTarget } from "./address";

export interface PostOptions {
  connectTimeoutMs: number;
  /** From the request sent to the answer's end (or its cap). */
  answerTimeoutMs: number;
  allowPrivate: boolean;
  maxAnswerBytes: number;
  signal?: AbortSignal;
}

/** What became of a POST: the status when one came, else why not; `answer` is the (capped) body. */
export interface PostResult {
  status: number | null;
  ok: boolean;
  error: string | null;
  answer: string;
}

const headerEnd = Buffer.from("\r\n\r\n");
/** Idle kept connections per address, port, scheme and host name; closed after idleMs unused. */
const idle = new Map<string, Conn[]>();
const idleMs = 30_000;
const maxIdlePerTarget = 4;

/** What an exchange in progress does with its socket's events. */
interface Exchange {
  data(chunk: Buffer): void;
  /** The socket ended, closed or failed (with the error when there was one). */
  gone(e?: NodeJS.ErrnoException): void;
}

/**
 * A socket with its listeners set once, for its whole life: they pass its events to the exchange
 * in progress, or (while it waits in the pool) drop it. So a kept connection costs no listener
 * changes per POST.
 */
class Conn {
  current: Exchange | undefined;
  key = "";
  constructor(readonly socket: Socket) {
    socket.on("data", (c: Buffer) => this.current?.data(c));
    const gone = (e?: NodeJS.ErrnoException) => {
      const x = this.current;
      if (x) x.gone(e);
      else this.drop();
    };
    socket.on("end", () => gone());
    socket.on("close", () => gone());
    socket.on("error", (e: NodeJS.ErrnoException) => gone(e));
    // Idle too long in the pool: closed (an exchange has its own time limit).
    socket.on("timeout", () => {
      if (!this.current) this.drop();
    });
  }

  /** Closes it and takes it out of the pool. */
  drop() {
    this.socket.destroy();
    const l = idle.get(this.key);
    if (l) {
      const i = l.indexOf(this);
      if (i >= 0) l.splice(i, 1);
      if (l.length === 0) idle.delete(this.key);
    }
  }
}

function keep(key: string, c: Conn) {
  const list = idle.get(key) ?? [];
  if (list.length >= maxIdlePerTarget) return c.socket.destroy();
  c.key = key;
  c.socket.setTimeout(idleMs);
  c.socket.unref();
  list.push(c);
  idle.set(key, list);
}

function take(key: string): Conn | undefined {
  const list = idle.get(key);
  while (list && list.length > 0) {
    const c = list.pop()!;
    if (list.length === 0) idle.delete(key);
    c.socket.setTimeout(0);
    c.socket.ref();
    if (!c.socket.destroyed && c.socket.writable) return c;
    c.socket.destroy();
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
    // A kept connection the receiver had closed meanwhile: nothing came back, so send on a new one
    // (at worst a repeat, with the same webhook-id).
    if (!r.nothing) return finish(key, r);
  }
  const socket = https
    ? tlsConnect({ host: target.address, port, servername: target.address === host ? undefined : host })
    : tcpConnect({ host: target.address, port, family: target.family });
  return finish(key, await exchange(new Conn(socket), request, o, https ? "secureConnect" : "connect"));
}

const failed = (error: string): PostResult => ({ status: null, ok: false, error, answer: "" });

function finish(key: string, r: Exchanged): PostResult {
  if (r.reusable) keep(key, r.conn);
  else r.conn.socket.destroy();
  return r.result;
}

interface Exchanged {
  result: PostResult;
  conn: Conn;
  /** The whole answer was read and the receiver keeps the connection open. */
  reusable: boolean;
  /** Not a byte came back (a kept connection found closed). */
  nothing: boolean;
}

/** Sends `request` on `conn` (once it connects, when `connecting` names the event) and reads the answer. */
function exchange(
  conn: Conn,
  request: string,
  o: PostOptions,
  connecting?: "connect" | "secureConnect",
): Promise<Exchanged> {
  const { socket } = conn;
  return new Promise<Exchanged>((resolve) => {
    let done = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    let all: Buffer | undefined;
    const settle = (result: PostResult, reusable = false) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      o.signal?.removeEventListener("abort", onAbort);
      if (connecting) socket.removeListener(connecting, onConnect);
      conn.current = undefined;
      resolve({ result, conn, reusable, nothing: all === undefined && result.status === null });
    };
    const onAbort = () => settle(failed("stopped"));
    o.signal?.addEventListener("abort", onAbort);
    /** The answer as far as it came, or undefined while the status line and headers are not all in. */
    const parse = (complete: boolean): [PostResult, boolean] | undefined => {
      if (all === undefined)
        return complete ? [failed("the connection closed before an HTTP answer"), false] : undefined;
      const end = all.indexOf(headerEnd);
      if (end < 0) return complete ? [failed("the connection closed before an HTTP answer"), false] : undefined;
      const head = all.subarray(0, end).toString("latin1");
      const m = /^HTTP\/1\.[01] (\d{3})/.exec(head);
      if (!m) return [failed("not an HTTP answer"), false];
      const status = Number(m[1]);
      const lengthMatch = /\r\ncontent-length:\s*(\d+)/i.exec(head);
      const length = lengthMatch ? Number(lengthMatch[1]) : undefined;
      const bodyIn = all.byteLength - end - 4;
      const whole = length !== undefined && bodyIn >= length;
      const capped = bodyIn >= o.maxAnswerBytes;
      const ok = status >= 200 && status < 300;
      // Done when the body is whole, capped, or the connection ended; a success without a length needs no body.
      if (!whole && !capped && !complete && !(ok && length === undefined)) return undefined;
      const answer = all.subarray(end + 4, end + 4 + o.maxAnswerBytes).toString("utf8");
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
        if (e) settle(failed(e.code ? `${e.code}: ${e.message}` : e.message));
        else {
          const r = parse(true)!;
          settle(r[0], false);
        }
      },
    };
    const onConnect = () => {
      clearTimeout(timer);
      timer = setTimeout(() => settle(failed(`no answer within ${o.answerTimeoutMs} ms`)), o.answerTimeoutMs);
      socket.write(request);
    };
    if (connecting) {
      timer = setTimeout(() => settle(failed(`no connection within ${o.connectTimeoutMs} ms`)), o.connectTimeoutMs);
      socket.once(connecting, onConnect);
    } else onConnect();
  });
}
