// The machine's ceiling for the store figures: Bun.serve parsing the same JSON body and
// answering a small JSON, no storage, no framework. `bun run bench/ceiling.ts <port>`.
const server = Bun.serve({
  port: Number(process.argv[2] ?? 0),
  hostname: "127.0.0.1",
  async fetch(req) {
    if (req.method !== "POST") return Response.json({ ok: true }); // run.ts polls /readyz
    const body = (await req.json()) as { content?: string };
    return Response.json({ ok: true, length: body.content?.length ?? 0 });
  },
});
console.log(`listening ${server.url}`);
