// A fake OpenAI-compatible chat-completions server over real HTTP, for tests.
// It speaks the non-streaming wire format only: the ai SDK's generateText
// calls doGenerate, which never sets `stream: true`.

type Usage = { prompt_tokens: number; completion_tokens: number };

/** One scripted answer of the fake model. */
export type FakeAnswer =
  | string // assistant message content, usage estimated from lengths
  | { content: string; usage?: Usage } // content with the usage to report
  | { toolCalls: FakeToolCall[]; content?: string } // the model calls tools (finish_reason tool_calls)
  | { status: number; body?: unknown } // a raw HTTP answer (an object body is sent as JSON)
  | { hang: true } // never answers; the request stays open until the client gives up
  | { garbage: true } // 200 with a body that is not JSON
  | { delayMs: number; answer: FakeAnswer } // answers `answer` after a pause
  | ((request: ChatRequest) => FakeAnswer);

/** A tool call the fake model makes; `arguments` an object (sent as JSON text) or raw text. */
export type FakeToolCall = { name: string; arguments?: Record<string, unknown> | string; id?: string };

/** The parsed body of a chat-completions request, as the client sent it. */
export type ChatRequest = {
  model: string;
  messages: { role: string; content: unknown }[];
  response_format?: { type: string; json_schema?: { name?: string; schema?: unknown; strict?: boolean } };
  [key: string]: unknown;
};

export type FakeModel = {
  /** Base URL ending in /v1, to hand to the client as its baseUrl. */
  url: string;
  /** Number of chat-completions requests received. */
  readonly calls: number;
  /** Parsed request bodies, in arrival order. */
  requests: ChatRequest[];
  /** Request headers, in arrival order. */
  headers: Headers[];
  /** Queues answers; each request takes the next one. */
  script(answers: FakeAnswer[]): void;
  /** Sets the answer used when the queue is empty. */
  reply(answer: FakeAnswer): void;
  /** Empties the queue, the records and the call count; restores the default answer. */
  reset(): void;
  /** Stops the server and drops open connections. */
  stop(): Promise<void>;
};

const estimate = (text: string) => Math.max(1, Math.ceil(text.length / 4));

/** Starts a fake model on 127.0.0.1 on a free port. */
export function startFakeModel(): FakeModel {
  const queue: FakeAnswer[] = [];
  const EMPTY: FakeAnswer = '{"operations":[]}';
  let fallback: FakeAnswer = EMPTY;
  let calls = 0;
  const requests: ChatRequest[] = [];
  const headers: Headers[] = [];
  const hanging = new Set<() => void>();

  function completion(
    request: ChatRequest,
    content: string | null,
    usage?: Usage,
    toolCalls?: FakeToolCall[],
  ): Response {
    const prompt = request.messages
      .map((m) => (typeof m.content === "string" ? m.content : JSON.stringify(m.content)))
      .join("\n");
    const u = usage ?? { prompt_tokens: estimate(prompt), completion_tokens: estimate(content ?? "") };
    const message = toolCalls
      ? {
          role: "assistant",
          content,
          tool_calls: toolCalls.map((c, i) => ({
            id: c.id ?? `call_${calls}_${i + 1}`,
            type: "function",
            function: {
              name: c.name,
              arguments: typeof c.arguments === "string" ? c.arguments : JSON.stringify(c.arguments ?? {}),
            },
          })),
        }
      : { role: "assistant", content };
    return Response.json({
      id: `chatcmpl-fake-${calls}`,
      object: "chat.completion",
      created: Math.floor(Date.now() / 1000),
      model: request.model,
      choices: [{ index: 0, message, finish_reason: toolCalls ? "tool_calls" : "stop" }],
      usage: { ...u, total_tokens: u.prompt_tokens + u.completion_tokens },
    });
  }

  function answer(request: ChatRequest, signal: AbortSignal, a: FakeAnswer): Response | Promise<Response> {
    if (typeof a === "function") return answer(request, signal, a(request));
    if (typeof a === "string") return completion(request, a);
    if ("toolCalls" in a) return completion(request, a.content ?? null, undefined, a.toolCalls);
    if ("content" in a) return completion(request, a.content, a.usage);
    if ("status" in a) {
      const body = a.body ?? { error: { message: `fake error ${a.status}`, type: "server_error" } };
      return typeof body === "string"
        ? new Response(body, { status: a.status })
        : Response.json(body, { status: a.status });
    }
    if ("delayMs" in a) {
      const later = a;
      return Bun.sleep(later.delayMs).then(() => answer(request, signal, later.answer));
    }
    if ("garbage" in a) return new Response("<html>{not json", { headers: { "content-type": "application/json" } });
    return new Promise((resolve) => {
      const done = () => {
        hanging.delete(done);
        resolve(new Response(null, { status: 499 }));
      };
      hanging.add(done);
      signal.addEventListener("abort", done);
    });
  }

  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    idleTimeout: 0, // a hanging answer must outlive Bun's default 10 s idle cut
    async fetch(req) {
      const path = new URL(req.url).pathname;
      if (req.method !== "POST" || path !== "/v1/chat/completions") return new Response("not found", { status: 404 });
      const request = (await req.json()) as ChatRequest;
      calls++;
      requests.push(request);
      headers.push(req.headers);
      if (request.stream)
        return Response.json({ error: { message: "the fake model does not stream" } }, { status: 400 });
      return answer(request, req.signal, queue.shift() ?? fallback);
    },
  });

  return {
    url: `http://127.0.0.1:${server.port}/v1`,
    get calls() {
      return calls;
    },
    requests,
    headers,
    script(answers) {
      queue.push(...answers);
    },
    reply(a) {
      fallback = a;
    },
    reset() {
      queue.length = 0;
      requests.length = 0;
      headers.length = 0;
      calls = 0;
      fallback = EMPTY;
    },
    async stop() {
      for (const done of [...hanging]) done();
      await server.stop(true);
    },
  };
}
