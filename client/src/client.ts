// The typed client for memd's HTTP API (createClient). Needs only `fetch` (Bun, Node 18+, browsers).
// Request and answer types are generated from the server's own schemas (types.gen.ts).

import { sseMessages } from "./sse.js";
import type {
  ApiKey,
  AuditEvent,
  ConsolidateRequest,
  ConsolidateResponse,
  ContextRequest,
  ContextResponse,
  CreatedKey,
  CreatedWebhook,
  CreateKeyRequest,
  CreateWebhook,
  Delivery,
  DiffRequest,
  DiffResponse,
  EntitiesQuery,
  EntitiesResponse,
  EraseRequest,
  Erasure,
  ErasuresQuery,
  ListResponse,
  Memory,
  NamespacesQuery,
  NamespacesResponse,
  PatchRequest,
  PatchWebhook,
  RestoreRequest,
  RestoreResponse,
  RevertRequest,
  RevertResponse,
  SearchRequest,
  SearchResponse,
  StoreRequest,
  StoreResponse,
  Webhook,
} from "./types.gen.js";

/** One field-level problem of a 400 answer. */
export interface ErrorDetail {
  field: string;
  message: string;
}

/** An error answer of memd (`{"error": {code, message, details?}}`), or a transport failure (status 0). */
export class MemdError extends Error {
  constructor(
    /** HTTP status; 0 when no answer arrived (network error, aborted). */
    readonly status: number,
    /** memd's error code, e.g. `invalid_request`, `forbidden`, `not_found` (see the catalogue in docs/api.md). */
    readonly code: string,
    message: string,
    readonly details: ErrorDetail[] = [],
    /** No answer because the connection was refused: the request never reached the server. */
    readonly refused = false,
  ) {
    super(message);
    this.name = "MemdError";
  }
}

export interface ClientOptions {
  /** Base URL of the server, e.g. http://127.0.0.1:8420 */
  url: string;
  /** An API key (sent as Authorization: Bearer). */
  key: string;
  /** A fetch to use instead of the global one. */
  fetch?: typeof fetch;
  /** Extra headers on every request. */
  headers?: Record<string, string>;
  /** Per request (each attempt), in ms; then `MemdError` status 0, code `timeout`. Default 60000 (a smart store waits for the model). */
  timeoutMs?: number;
  /**
   * Retries after 429 `rate_limited` and 503 (default 2), waiting the server's `Retry-After`
   * (at most `maxRetryWaitMs`, else the error is thrown at once), or 500 ms doubling. A 503 is
   * retried only where repeating is safe: reads, and writes carrying an `Idempotency-Key`.
   * A refused connection is retried the same way, a cut one where repeating is safe, a timeout
   * never (the request may still be running).
   */
  maxRetries?: number;
  /** The longest `Retry-After` waited for, in ms (default 30000). */
  maxRetryWaitMs?: number;
  /**
   * Every `store`, `update`, `delete` and `deleteEntity` carries an `Idempotency-Key`: the
   * caller's `{ idempotencyKey }`, else a fresh one per call, so a retry writes once (default
   * true). false: one only when given; such writes are then retried after a 429 only.
   */
  idempotencyKeys?: boolean;
}

/** The defaults of ClientOptions, as the Python client's. */
export const clientDefaults = { timeoutMs: 60_000, maxRetries: 2, maxRetryWaitMs: 30_000 } as const;

/** Per-call options of the writes that the server makes safe to retry. */
export interface WriteOptions {
  /**
   * Sent as `Idempotency-Key` (1 to 255 printable ASCII characters): a retry with the same key
   * and request within 24 hours gets the first answer and writes nothing again.
   */
  idempotencyKey?: string;
}

/** Query of `list`: current memories of a namespace or entity, newest first, a page at a time. */
export interface ListOptions {
  namespace: string;
  entity?: string;
  /** Only entities whose name starts with this text. */
  entityPrefix?: string;
  category?: string;
  /** Only memories carrying every one of these tags. */
  tags?: string[];
  /** 1 to 1000; default 100. */
  limit?: number;
  /** The previous page's `nextCursor`. */
  cursor?: string;
  /** ISO 8601: the entity's memories exactly as they were current then (needs `entity`; docs/time.md). */
  asOf?: string;
  /** ISO 8601: only memories observed at or after it. */
  observedAfter?: string;
  /** ISO 8601: only memories observed strictly before it. */
  observedBefore?: string;
}

/** Query of `events`: audit events, newest first. */
export interface EventsOptions {
  namespace?: string;
  entity?: string;
  memoryId?: string;
  /** 1 to 1000; default 100. */
  limit?: number;
}

/** Options of `stream()`. */
export interface StreamOptions {
  namespace: string;
  entity?: string;
  /** Start after this cursor (an event's `cursor`). */
  after?: string;
  /** Start after this time (ISO 8601). Without `after` or `since`, only new events. */
  since?: string;
  /** Stops the stream (the iterator then ends). */
  signal?: AbortSignal;
  /**
   * Wait before reconnecting after a dropped connection, in ms; doubles up to 10 s while failing,
   * and is at least the server's Retry-After (429, 503). Default 500.
   */
  retryMs?: number;
}

/** One line of an export: the header first, then records (`type` memory, event or erasure). */
export type ExportLine = { type: string } & Record<string, unknown>;

/** One message of the live change stream. */
export interface StreamEvent {
  /** Resume from here: pass as `after`, or it is sent as Last-Event-ID on reconnection. */
  cursor: string;
  event: AuditEvent;
}

const query = (q: object) => {
  const p = new URLSearchParams();
  for (const [k, v] of Object.entries(q))
    if (Array.isArray(v)) for (const item of v) p.append(k, String(item));
    else if (v !== undefined && v !== null) p.set(k, String(v));
  const s = p.toString();
  return s ? `?${s}` : "";
};

/** Creates a client. Every method throws `MemdError` on an error answer. */
export function createClient(options: ClientOptions) {
  const base = options.url.replace(/\/+$/, "");
  const doFetch = options.fetch ?? fetch;
  const auth = { ...options.headers, authorization: `Bearer ${options.key}` };

  const timeoutMs = options.timeoutMs ?? clientDefaults.timeoutMs;
  const maxRetries = options.maxRetries ?? clientDefaults.maxRetries;
  const maxRetryWaitMs = options.maxRetryWaitMs ?? clientDefaults.maxRetryWaitMs;
  const autoKeys = options.idempotencyKeys ?? true;

  /**
   * The answer to a request, or MemdError status 0 when none arrived: within timeoutMs, its body
   * read included (`timed`: an export, read as long as it lasts, is not).
   */
  const send = (path: string, init: RequestInit, timed = true) => {
    const signal = timed ? AbortSignal.timeout(timeoutMs) : undefined;
    return doFetch(base + path, { ...init, signal }).catch((e) => {
      if (signal?.aborted) throw new MemdError(0, "timeout", `memd at ${base} did not answer within ${timeoutMs} ms`);
      throw new MemdError(0, "network_error", `memd unreachable at ${base}: ${(e as Error).message}`, [], refused(e));
    });
  };

  /**
   * One call, retried as ClientOptions.maxRetries says. `safe`: may a 503 or a lost answer be
   * repeated (reads; writes with an Idempotency-Key). `write`: a write that takes a key.
   */
  async function call<T>(
    method: string,
    path: string,
    body?: unknown,
    write?: WriteOptions | "no-key",
    safe = write === undefined,
  ): Promise<T> {
    const headers: Record<string, string> = { ...auth };
    if (body !== undefined) headers["content-type"] = "application/json";
    if (write !== undefined && write !== "no-key") {
      const key = write.idempotencyKey ?? (autoKeys ? crypto.randomUUID() : undefined);
      if (key !== undefined) headers["idempotency-key"] = key;
      safe = key !== undefined;
    }
    const init = { method, headers, body: body === undefined ? undefined : JSON.stringify(body) };
    for (let attempt = 0; ; attempt++) {
      let wait: number | undefined;
      try {
        const res = await send(path, init);
        if (res.ok || attempt >= maxRetries) return await answer<T>(res, base, timeoutMs);
        wait = retryWait(res, attempt, safe, maxRetryWaitMs);
        if (wait === undefined) return await answer<T>(res, base, timeoutMs);
        await res.body?.cancel();
      } catch (e) {
        // No answer: a refused connection never reached the server; a cut one may have run it; a
        // timeout is not repeated (the request may still be running: the caller decides).
        if (!(e instanceof MemdError) || e.status !== 0 || e.code === "timeout" || attempt >= maxRetries) throw e;
        if (!(safe || e.refused)) throw e;
        wait = 500 * 2 ** attempt;
      }
      await sleep(wait);
    }
  }

  const id = (value: string) => encodeURIComponent(value);

  return {
    /**
     * Stores a memory: `infer: false` verbatim, otherwise (the default) extracted by the server's
     * model. With `key`: a keyed fact, which updates the memory holding the key in place.
     */
    store: (req: StoreRequest, write?: WriteOptions) => call<StoreResponse>("POST", "/v1/memory", req, write ?? {}),
    /** What changed since a time, folded per memory. */
    diff: (req: DiffRequest) => call<DiffResponse>("POST", "/v1/memory/diff", req, undefined, true),
    /** Audit events, newest first. */
    events: (q: EventsOptions) => call<AuditEvent[]>("GET", `/v1/memory/events${query(q)}`),
    /** Current memories of a namespace or entity, newest first; page on with `nextCursor`. */
    list: ({ tags, ...q }: ListOptions) => call<ListResponse>("GET", `/v1/memory${query({ ...q, tag: tags })}`),
    /**
     * One current memory (with `asOf`: as it was current at that instant); `MemdError` 404 when
     * unknown, gone (then) or outside the key's namespaces.
     */
    get: (memoryId: string, q: { asOf?: string } = {}) => call<Memory>("GET", `/v1/memory/${id(memoryId)}${query(q)}`),
    /** The current memory holding a keyed fact's key (with `asOf`: then), or undefined (docs/keyed-facts.md). */
    getByKey: async (q: { namespace: string; entity: string; key: string; asOf?: string }) =>
      (await call<ListResponse>("GET", `/v1/memory${query(q)}`)).memories[0] as Memory | undefined,
    /**
     * Reverts a memory to its state right after one of its events (`toEvent`: an event id as
     * `events` gives it); `dryRun: true` answers what would change and writes nothing.
     */
    revert: (memoryId: string, req: RevertRequest, write?: WriteOptions) =>
      call<RevertResponse>("POST", `/v1/memory/${id(memoryId)}/revert`, req, write),
    /** Merges an entity's near-duplicate memories, losing nothing (`dryRun: true`: the groups, nothing written). */
    consolidate: (req: ConsolidateRequest, write?: WriteOptions) =>
      call<ConsolidateResponse>("POST", "/v1/memory/consolidate", req, write),
    /** Restores every memory of an entity to what it was at `asOf`, in one write (`dryRun: true`: what would change). */
    restore: (req: RestoreRequest, write?: WriteOptions) =>
      call<RestoreResponse>("POST", "/v1/memory/restore", req, write),
    /** Deletes one memory (event DELETE). */
    delete: (memoryId: string, write?: WriteOptions) =>
      call<{ deleted: true }>("DELETE", `/v1/memory/${id(memoryId)}`, undefined, write ?? {}),
    /** Deletes every current memory of an entity (one DELETE event each). */
    deleteEntity: (q: { namespace: string; entity: string }, write?: WriteOptions) =>
      call<{ deleted: number }>("DELETE", `/v1/memory${query(q)}`, undefined, write ?? {}),
    /** Ranked search over current memories: by words, by meaning, or both. */
    search: (req: SearchRequest) => call<SearchResponse>("POST", "/v1/memory/search", req, undefined, true),
    /**
     * The memories to put in a prompt before answering, as one text block within maxTokens
     * (cl100k_base tokens, default 1000): the best hits for `query`, else the most important and
     * most recent memories, grouped by category.
     */
    context: (req: ContextRequest) => call<ContextResponse>("POST", "/v1/memory/context", req, undefined, true),
    /** Corrects a memory in place (event UPDATE); `null` removes tags or metadata. */
    update: (memoryId: string, patch: PatchRequest, write?: WriteOptions) =>
      call<Memory>("PATCH", `/v1/memory/${id(memoryId)}`, patch, write ?? {}),
    /** Erases every memory of an entity and their content in the audit trail (admin). Not repeated after a 503. */
    erase: (req: EraseRequest) => call<Erasure>("POST", "/v1/memory/erase", req, "no-key"),
    /** The erasures of a namespace or entity, oldest first (admin). */
    erasures: (q: ErasuresQuery) => call<Erasure[]>("GET", `/v1/memory/erasures${query(q)}`),
    /** The calling key (never its secret). */
    me: () => call<ApiKey>("GET", "/v1/me"),
    /** Namespaces the key covers that hold data, in name order; page on with `nextCursor`. */
    namespaces: (q: Omit<NamespacesQuery, "limit"> & { limit?: number } = {}) =>
      call<NamespacesResponse>("GET", `/v1/namespaces${query(q)}`),
    /** Entities of a namespace with their memory counts; page on with `nextCursor`. */
    entities: (q: Omit<EntitiesQuery, "limit"> & { limit?: number }) =>
      call<EntitiesResponse>("GET", `/v1/entities${query(q)}`),
    /**
     * An export as JSON Lines, parsed one line at a time (admin): the header, then every memory,
     * event and erasure of the namespaces given (all, for a key covering `*`).
     */
    export: (q: { namespaces?: string[] } = {}) =>
      exportLines(() => send(`/v1/export${query({ namespace: q.namespaces })}`, { headers: auth }, false)),
    /** API keys (admin). */
    keys: {
      /** The secret is in this answer only. Not repeated after a 503. */
      create: (req: CreateKeyRequest) => call<CreatedKey>("POST", "/v1/keys", req, "no-key"),
      list: () => call<ApiKey[]>("GET", "/v1/keys"),
      get: (keyId: string) => call<ApiKey>("GET", `/v1/keys/${id(keyId)}`),
      /** Revoking twice revokes once: repeated like a read. */
      revoke: (keyId: string) =>
        call<{ id: string; revoked: true }>("DELETE", `/v1/keys/${id(keyId)}`, undefined, undefined, true),
    },
    /** Webhook subscriptions (docs/webhooks.md); check deliveries with verifyWebhook. */
    webhooks: {
      /** Subscribes a URL; the signing secret is in this answer only. */
      create: (req: CreateWebhook) => call<CreatedWebhook>("POST", "/v1/webhooks", req, "no-key"),
      list: () => call<Webhook[]>("GET", "/v1/webhooks"),
      get: (webhookId: string) => call<Webhook>("GET", `/v1/webhooks/${id(webhookId)}`),
      /** Changes the URL, filter or description; `state: "paused"` / `"active"` pauses and resumes. */
      update: (webhookId: string, patch: PatchWebhook) =>
        call<Webhook>("PATCH", `/v1/webhooks/${id(webhookId)}`, patch),
      delete: (webhookId: string) => call<{ id: string; deleted: true }>("DELETE", `/v1/webhooks/${id(webhookId)}`),
      /** A new secret, in this answer only; the old one keeps signing for 24 hours. */
      rotateSecret: (webhookId: string) =>
        call<CreatedWebhook>("POST", `/v1/webhooks/${id(webhookId)}/rotate-secret`, undefined, "no-key"),
      /** Recent delivery attempts, newest first. */
      deliveries: (webhookId: string, q: { limit?: number } = {}) =>
        call<Delivery[]>("GET", `/v1/webhooks/${id(webhookId)}/deliveries${query(q)}`),
      /** Sends every matching event from `fromSeq` on again, with the same webhook-ids. */
      replay: (webhookId: string, fromSeq: number) =>
        call<Webhook>("POST", `/v1/webhooks/${id(webhookId)}/replay`, { fromSeq }),
    },
    /**
     * The live change stream as an async iterator, oldest first: a replay from `after`/`since`, then
     * every new event. A dropped connection, a server restart or an `overflow` (this consumer fell too
     * far behind) is resumed by itself from the last cursor, so nothing is lost or repeated. Errors
     * that a retry cannot fix (400, 401, 403) are thrown. End it with `break` or `signal`.
     */
    stream: (opts: StreamOptions) => streamEvents(base, doFetch, auth, opts),
  };
}

export type MemdClient = ReturnType<typeof createClient>;

/** The JSON Lines of an answer, parsed a line at a time; the request is sent on the first read. */
async function* exportLines(request: () => Promise<Response>): AsyncGenerator<ExportLine, void, undefined> {
  const res = await request();
  if (!res.ok || !res.body) return void (await answer(res));
  const decoder = new TextDecoder();
  let rest = "";
  for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
    rest += decoder.decode(chunk, { stream: true });
    for (let nl = rest.indexOf("\n"); nl !== -1; nl = rest.indexOf("\n")) {
      const line = rest.slice(0, nl);
      rest = rest.slice(nl + 1);
      if (line.trim()) yield JSON.parse(line) as ExportLine;
    }
  }
  rest += decoder.decode();
  if (rest.trim()) yield JSON.parse(rest) as ExportLine;
}

async function answer<T>(res: Response, base?: string, timeoutMs?: number): Promise<T> {
  let text: string;
  try {
    text = await res.text();
  } catch (e) {
    // The body did not come within the timeout (or the connection was cut while it came).
    const timedOut = (e as Error)?.name === "TimeoutError" || (e as Error)?.name === "AbortError";
    throw timedOut
      ? new MemdError(0, "timeout", `memd at ${base} did not answer within ${timeoutMs} ms`)
      : new MemdError(0, "network_error", `memd at ${base}: the answer was cut: ${(e as Error).message}`);
  }
  let body: unknown;
  try {
    body = text ? JSON.parse(text) : undefined;
  } catch {
    body = undefined;
  }
  if (res.ok) return body as T;
  throw errorOf(res.status, body, text);
}

function errorOf(status: number, body: unknown, text: string): MemdError {
  const e = (body as { error?: { code?: string; message?: string; details?: ErrorDetail[] } } | undefined)?.error;
  if (e && typeof e.code === "string")
    return new MemdError(status, e.code, e.message ?? e.code, Array.isArray(e.details) ? e.details : []);
  return new MemdError(status, `http_${status}`, text.slice(0, 200) || `HTTP ${status}`);
}

/** Whether a transport error is a refused connection (Bun: ConnectionRefused; Node: ECONNREFUSED). */
function refused(e: unknown): boolean {
  const err = e as { code?: unknown; cause?: { code?: unknown } };
  return /ConnectionRefused|ECONNREFUSED/.test(`${err?.code ?? ""} ${err?.cause?.code ?? ""}`);
}

/** Ms to wait before repeating an answered request, or undefined: do not (as the Python client). */
function retryWait(res: Response, attempt: number, safe: boolean, maxWaitMs: number): number | undefined {
  if (res.status !== 429 && !(res.status === 503 && safe)) return undefined;
  const asked = retryAfterMs(res.headers.get("retry-after"));
  const wait = asked ?? 500 * 2 ** attempt;
  return wait > maxWaitMs ? undefined : wait;
}

/** Retry-After in ms: a number of seconds or an HTTP date. */
function retryAfterMs(value: string | null): number | undefined {
  if (!value) return undefined;
  const seconds = Number(value);
  if (Number.isFinite(seconds)) return Math.max(0, seconds * 1000);
  const when = Date.parse(value);
  return Number.isNaN(when) ? undefined : Math.max(0, when - Date.now());
}

const permanent = (status: number) => status >= 400 && status < 500 && status !== 408 && status !== 429;

async function* streamEvents(
  base: string,
  doFetch: typeof fetch,
  auth: Record<string, string>,
  opts: StreamOptions,
): AsyncGenerator<StreamEvent, void, undefined> {
  const firstRetry = opts.retryMs ?? 500;
  let retry = firstRetry;
  let cursor: string | undefined = opts.after;
  const q = { namespace: opts.namespace, entity: opts.entity };
  while (!opts.signal?.aborted) {
    /** The server's Retry-After (429, 503), in ms: the wait before reconnecting is at least that. */
    let asked = 0;
    const abort = new AbortController();
    const onAbort = () => abort.abort();
    opts.signal?.addEventListener("abort", onAbort);
    try {
      // The URL stays the caller's; where to resume goes in Last-Event-ID, which the server prefers.
      const url = `${base}/v1/memory/events/stream${query({ ...q, after: opts.after, since: opts.since })}`;
      const headers: Record<string, string> = { ...auth, accept: "text/event-stream" };
      if (cursor !== undefined) headers["last-event-id"] = cursor;
      const res = await doFetch(url, { headers, signal: abort.signal }).catch(() => undefined);
      if (res && !res.ok) {
        const text = await res.text();
        let body: unknown;
        try {
          body = JSON.parse(text);
        } catch {}
        if (permanent(res.status)) throw errorOf(res.status, body, text);
        asked = Number(res.headers.get("retry-after") ?? 0) * 1000 || 0;
      } else if (res?.body) {
        for await (const m of sseMessages(res.body)) {
          // The first message (and overflow) carry a cursor without an event: remember it all the same.
          if (m.id !== undefined) cursor = m.id;
          if (m.event === "memory" && m.data !== undefined) {
            retry = firstRetry;
            yield { cursor: m.id!, event: JSON.parse(m.data) as AuditEvent };
          } else if (m.event === "overflow" && m.data !== undefined) {
            cursor = (JSON.parse(m.data) as { cursor: string }).cursor;
            retry = 0; // fell behind: resume at once
          }
        }
      }
    } catch (e) {
      if (e instanceof MemdError) throw e;
      // A dropped connection: resume below.
    } finally {
      opts.signal?.removeEventListener("abort", onAbort);
      abort.abort();
    }
    if (opts.signal?.aborted) return;
    await sleep(Math.max(retry, asked), opts.signal);
    retry = Math.min(10_000, Math.max(firstRetry, retry * 2));
  }
}

const sleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve) => {
    if (ms <= 0) return resolve();
    const t = setTimeout(done, ms);
    function done() {
      clearTimeout(t);
      signal?.removeEventListener("abort", done);
      resolve();
    }
    signal?.addEventListener("abort", done);
  });
