// One webhook POST over a socket of our own: connect to the address resolveTarget checked (so a
// name cannot resolve to another address between the check and the connection), HTTP/1.1 with
// Connection: close, time limits on the connection and on the answer, no redirect followed, and
// at most `maxAnswerBytes` of the answer read.
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

/** POSTs `body` (JSON) to `url` with `headers`; never throws. */
export async function postWebhook(
  url: URL,
  headers: Record<string, string>,
  body: string,
  o: PostOptions,
): Promise<PostResult> {
  const failed = (error: string): PostResult => ({ status: null, ok: false, error, answer: "" });
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
  const payload = Buffer.from(body);
  const head =
    `POST ${url.pathname}${url.search} HTTP/1.1\r\n` +
    `Host: ${url.host}\r\n` +
    "User-Agent: memd-webhooks\r\n" +
    "Content-Type: application/json\r\n" +
    `Content-Length: ${payload.byteLength}\r\n` +
    "Connection: close\r\n" +
    Object.entries(headers)
      .map(([k, v]) => `${k}: ${v}\r\n`)
      .join("") +
    "\r\n";

  return new Promise<PostResult>((resolve) => {
    let done = false;
    let socket: Socket;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const chunks: Buffer[] = [];
    let received = 0;
    const finish = (r: PostResult) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      o.signal?.removeEventListener("abort", onAbort);
      socket?.destroy();
      resolve(r);
    };
    const onAbort = () => finish(failed("stopped"));
    o.signal?.addEventListener("abort", onAbort);
    /** The answer as far as it came: its status and (capped) body, or undefined before a status line and headers. */
    const parse = (complete: boolean): PostResult | undefined => {
      const all = Buffer.concat(chunks);
      const end = all.indexOf(headerEnd);
      if (end < 0) return complete ? failed("the connection closed before an HTTP answer") : undefined;
      const m = /^HTTP\/1\.[01] (\d{3})/.exec(all.subarray(0, end).toString("latin1"));
      if (!m) return failed("not an HTTP answer");
      const status = Number(m[1]);
      const answer = all.subarray(end + 4, end + 4 + o.maxAnswerBytes).toString("utf8");
      const ok = status >= 200 && status < 300;
      const error = ok
        ? null
        : status >= 300 && status < 400
          ? `answered ${status}; redirects are not followed`
          : `answered ${status}`;
      return { status, ok, error, answer };
    };
    timer = setTimeout(() => finish(failed(`no connection within ${o.connectTimeoutMs} ms`)), o.connectTimeoutMs);
    const onConnect = () => {
      clearTimeout(timer);
      timer = setTimeout(() => finish(failed(`no answer within ${o.answerTimeoutMs} ms`)), o.answerTimeoutMs);
      socket.write(head);
      socket.write(payload);
    };
    socket = https
      ? tlsConnect({ host: target.address, port, servername: target.address === host ? undefined : host }, onConnect)
      : tcpConnect({ host: target.address, port, family: target.family }, onConnect);
    socket.on("data", (chunk: Buffer) => {
      chunks.push(chunk);
      received += chunk.byteLength;
      const r = parse(false);
      // The status and headers are in: a success needs nothing more; a failure waits for a little of its body, for the log.
      if (r && (r.ok || received >= o.maxAnswerBytes)) finish(r);
    });
    socket.on("end", () => finish(parse(true)!));
    socket.on("close", () => finish(parse(true)!));
    socket.on("error", (e: NodeJS.ErrnoException) => finish(failed(e.code ? `${e.code}: ${e.message}` : e.message)));
  });
}
