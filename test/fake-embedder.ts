// A fake OpenAI-compatible embeddings server over real HTTP (POST /v1/embeddings), for tests
// and the search bench. Vectors are deterministic: a bag of words (and, optionally, character
// trigrams, which make typos close) hashed into `dimensions` buckets. `similar` declares words
// that mean the same, so two paraphrases without a shared word get close vectors.

export type FakeEmbedder = {
  /** Base URL ending in /v1. */
  url: string;
  readonly calls: number;
  /** Inputs embedded, per call. */
  inputs: string[][];
  /** Makes every call fail with HTTP 500 (true), hang until the client gives up ("hang"), or answer (false). */
  fail(mode: boolean | "hang"): void;
  reset(): void;
  stop(): Promise<void>;
};

const stopwords = new Set(
  "a an the is are was be to of and or in on at for with by from as it its this that does doesn't don't not no user users i my me".split(
    " ",
  ),
);

/** FNV-1a, 32 bits. */
function hash(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h;
}

export interface FakeVectorOptions {
  dimensions?: number;
  /** Groups of words that mean the same: each word counts as the group's first. */
  similar?: string[][];
  /** Also count character trigrams of each word (typo-tolerant). */
  trigrams?: boolean;
}

/** The fake embedding of one text (not normalised). */
export function fakeVector(text: string, o: FakeVectorOptions = {}, canon = canonicalizer(o.similar)): number[] {
  const dims = o.dimensions ?? 64;
  const v: number[] = Array.from({ length: dims }, () => 0);
  const words = text
    .normalize("NFKD")
    .replace(/\p{M}/gu, "")
    .toLowerCase()
    .match(/[\p{L}\p{N}']+/gu);
  for (const raw of words ?? []) {
    if (stopwords.has(raw)) continue;
    const w = canon(raw);
    v[hash(w) % dims] += 1;
    if (o.trigrams) {
      const padded = ` ${raw} `;
      for (let i = 0; i + 3 <= padded.length; i++) v[hash(`#${padded.slice(i, i + 3)}`) % dims] += 0.35;
    }
  }
  if (!v.some((x) => x !== 0)) v[0] = 1;
  return v;
}

export function canonicalizer(similar: string[][] = []): (w: string) => string {
  const map = new Map<string, string>();
  for (const group of similar) for (const w of group) map.set(w, group[0]);
  return (w) => map.get(w) ?? map.get(w.replace(/s$/, "")) ?? w;
}

/** Starts a fake embeddings server on 127.0.0.1 on a free port. */
export function startFakeEmbedder(o: FakeVectorOptions = {}): FakeEmbedder {
  const canon = canonicalizer(o.similar);
  let calls = 0;
  let mode: boolean | "hang" = false;
  const inputs: string[][] = [];
  const hanging = new Set<() => void>();
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    idleTimeout: 0,
    async fetch(req) {
      const path = new URL(req.url).pathname;
      if (req.method !== "POST" || path !== "/v1/embeddings") return new Response("not found", { status: 404 });
      const body = (await req.json()) as { input: string | string[]; model: string; dimensions?: number };
      const input = Array.isArray(body.input) ? body.input : [body.input];
      calls++;
      inputs.push(input);
      if (mode === true)
        return Response.json({ error: { message: "fake embedder down", type: "server_error" } }, { status: 500 });
      if (mode === "hang")
        return new Promise<Response>((resolve) => {
          const done = () => {
            hanging.delete(done);
            resolve(new Response(null, { status: 499 }));
          };
          hanging.add(done);
          req.signal.addEventListener("abort", done);
        });
      const dims = body.dimensions ?? o.dimensions;
      const tokens = input.reduce((n, s) => n + Math.max(1, Math.ceil(s.length / 4)), 0);
      return Response.json({
        object: "list",
        model: body.model,
        data: input.map((s, index) => ({
          object: "embedding",
          index,
          embedding: fakeVector(s, { ...o, dimensions: dims }, canon),
        })),
        usage: { prompt_tokens: tokens, total_tokens: tokens },
      });
    },
  });
  return {
    url: `http://127.0.0.1:${server.port}/v1`,
    get calls() {
      return calls;
    },
    inputs,
    fail(m) {
      mode = m;
      if (m !== "hang") for (const done of [...hanging]) done();
    },
    reset() {
      calls = 0;
      inputs.length = 0;
      mode = false;
    },
    async stop() {
      for (const done of [...hanging]) done();
      await server.stop(true);
    },
  };
}
