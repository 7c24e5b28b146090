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
const idle = new Map<string, Socket[]>();
const idleMs = 30_000;
const maxIdlePerTarget = 4;

function keep(key: string, socket: Socket) {
  const list = idle.get(key) ?? [];
  if (list.length >= maxIdlePerTarget) return socket.destroy();
  const drop = () => {
    socket.destroy();
    const l = idle.get(key);
    if (l) {
      const i = l.indexOf(socket);
      if (i >= 0) l.splice(i, 1);
      if (l.length === 0) idle.delete(key);
    }
  };
  socket.once("error", drop);
  socket.once("close", drop);
  socket.once("end", drop);
  socket.setTimeout(idleMs, drop);
  socket.unref();
  (socket as Socket & { dropIdle?: () => void }).dropIdle = drop;
  list.push(socket);
  idle.set(key, list);
}

function take(key: string): Socket | undefined {
  const list = idle.get(key);
  while (list && list.length > 0) {
    const s = list.pop() as Socket & { dropIdle?: () => void };
    if (list.length === 0) idle.delete(key);
    if (s.dropIdle) {
      s.removeListener("error", s.dropIdle);
      s.removeListener("close", s.dropIdle);
      s.removeListener("end", s.dropIdle);
      s.removeListener("timeout", s.dropIdle);
    }
    s.setTimeout(0);
    s.ref();
    if (!s.destroyed && s.writable) return s;
    s.destroy();
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
  const payload = Buffer.from(body);
  const head = Buffer.from(
    `POST ${url.pathname}${url.search} HTTP/1.1\r\n` +
      `Host: ${url.host}\r\n` +
      "User-Agent: memd-webhooks\r\n" +
      "Content-Type: application/json\r\n" +
      `Content-Length: ${payload.byteLength}\r\n` +
      Object.entries(headers)
        .map(([k, v]) => `${k}: ${v}\r\n`)
        .join("") +
      "\r\n",
  );
  const request = Buffer.concat([head, payload]);
  const kept = take(key);
  if (kept) {
    const r = await exchange(kept, request, o);
    // A kept connection the receiver had closed meanwhile: nothing came back, so send on a new one
    // (at worst a repeat, with the same webhook-id).
    if (!r.nothing) return finish(key, r);
  }
  const fresh = https
    ? tlsConnect({ host: target.address, port, servername: target.address === host ? undefined : host })
    : tcpConnect({ host: target.address, port, family: target.family });
  return finish(key, await exchange(fresh, request, o, true));
}

const failed = (error: string): PostResult => ({ status: null, ok: false, error, answer: "" });

function finish(key: string, r: Exchanged): PostResult {
  if (r.reusable) keep(key, r.socket);
  else r.socket.destroy();
  return r.result;
}

interface Exchanged {
  result: PostResult;
  socket: Socket;
  /** The whole answer was read and the receiver keeps the connection open. */
  reusable: boolean;
  /** Not a byte came back (a kept connection found closed). */
  nothing: boolean;
}

/** Sends `request` on `socket` (connecting first when `connecting`) and reads the answer. */
function exchange(socket: Socket, request: Buffer, o: PostOptions, connecting = false): Promise<Exchanged> {
  return new Promise<Exchanged>((resolve) => {
    let done = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const chunks: Buffer[] = [];
    let received = 0;
    const settle = (result: PostResult, reusable = false) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      o.signal?.removeEventListener("abort", onAbort);
      socket.removeListener("data", onData);
      socket.removeListener("end", onEnd);
      socket.removeListener("close", onEnd);
      socket.removeListener("error", onError);
      socket.removeListener(connecting ? "secureConnect" : "connect", onConnect);
      socket.removeListener("connect", onConnect);
      if (!reusable) socket.on("error", () => {}); // a late error of a socket being destroyed
      resolve({ result, socket, reusable, nothing: received === 0 && result.status === null });
    };
    const onAbort = () => settle(failed("stopped"));
    o.signal?.addEventListener("abort", onAbort);
    /** The answer as far as it came, or undefined while the status line and headers are not all in. */
    const parse = (complete: boolean): [PostResult, boolean] | undefined => {
      const all = Buffer.concat(chunks);
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
    const onData = (chunk: Buffer) => {
      chunks.push(chunk);
      received += chunk.byteLength;
      const r = parse(false);
      if (r) settle(r[0], r[1]);
    };
    const onEnd = () => {
      const r = parse(true)!;
      settle(r[0], false);
    };
    const onError = (e: NodeJS.ErrnoException) => settle(failed(e.code ? `${e.code}: ${e.message}` : e.message));
    const onConnect = () => {
      clearTimeout(timer);
      timer = setTimeout(() => settle(failed(`no answer within ${o.answerTimeoutMs} ms`)), o.answerTimeoutMs);
      socket.write(request);
    };
    socket.on("data", onData);
    socket.on("end", onEnd);
    socket.on("close", onEnd);
    socket.on("error", onError);
    if (connecting) {
      timer = setTimeout(() => settle(failed(`no connection within ${o.connectTimeoutMs} ms`)), o.connectTimeoutMs);
      socket.once(socket instanceof Object && "encrypted" in socket ? "secureConnect" : "connect", onConnect);
    } else onConnect();
  });
}
