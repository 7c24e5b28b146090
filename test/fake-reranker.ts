// A fake reranker over real HTTP speaking the protocol Cohere, Jina, Voyage, vLLM, llama.cpp and
// TEI share (POST /v1/rerank {model, query, documents, top_n} -> {results: [{index,
// relevance_score}]}), for tests. Its relevance is `score(query, document)`: by default the share
// of the query's words the document holds, divided by its length in words (short and on point
// first), which orders differently from BM25.

export type FakeReranker = {
  /** Base URL ending in /v1. */
  url: string;
  /** Every request body received. */
  requests: { model: string; query: string; documents: string[]; top_n?: number }[];
  /** Answers HTTP 500 (true), hangs until the client gives up ("hang"), answers garbage ("garbage"), or answers (false). */
  fail(mode: boolean | "hang" | "garbage"): void;
  stop(): Promise<void>;
};

const words = (s: string) => s.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? [];

export const overlapScore = (query: string, doc: string) => {
  const q = new Set(words(query));
  const d = words(doc);
  return d.filter((w) => q.has(w)).length / Math.max(1, d.length);
};

export function startFakeReranker(score: (query: string, doc: string) => number = overlapScore): FakeReranker {
  let mode: boolean | "hang" | "garbage" = false;
  const requests: FakeReranker["requests"] = [];
  const hanging = new Set<() => void>();
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    idleTimeout: 0,
    async fetch(req) {
      if (req.method !== "POST" || new URL(req.url).pathname !== "/v1/rerank")
        return new Response("not found", { status: 404 });
      const body = (await req.json()) as FakeReranker["requests"][number];
      requests.push(body);
      if (mode === true) return Response.json({ error: "fake reranker down" }, { status: 500 });
      if (mode === "garbage") return Response.json({ results: [{ index: 999, relevance_score: 1 }] });
      if (mode === "hang")
        return new Promise<Response>((resolve) => {
          const done = () => {
            hanging.delete(done);
            resolve(new Response(null, { status: 499 }));
          };
          hanging.add(done);
          req.signal.addEventListener("abort", done);
        });
      const results = body.documents
        .map((d, index) => ({ index, relevance_score: score(body.query, d) }))
        .sort((a, b) => b.relevance_score - a.relevance_score || a.index - b.index)
        .slice(0, body.top_n ?? body.documents.length);
      return Response.json({ id: "fake", results, meta: { billed_units: { search_units: 1 } } });
    },
  });
  return {
    url: `http://127.0.0.1:${server.port}/v1`,
    requests,
    fail(m) {
      mode = m;
      if (m !== "hang") for (const done of [...hanging]) done();
    },
    async stop() {
      for (const done of [...hanging]) done();
      await server.stop(true);
    },
  };
}
