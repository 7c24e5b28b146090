// Webhook receivers for bench/webhooks.ts, in a process of their own (so they do not share the
// bench's event loop with the writers): `bun run bench/webhook-receivers.ts <n>` starts n
// receivers on 127.0.0.1 answering 200 at once, and prints their ports as one JSON line.
// Every receiver also answers GET /stats: the deliveries counted by the whole process, and the
// arrivals (memory id, time since the epoch in ms, sub-millisecond) since the last GET /stats;
// POST /reset sets the count to 0.
const n = Number(process.argv[2] ?? 10);
let got = 0;
let arrivals: [string, number][] = [];
const now = () => performance.timeOrigin + performance.now();
const servers = Array.from({ length: n }, () =>
  Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    async fetch(req) {
      if (req.method === "GET") {
        const body = JSON.stringify({ got, arrivals });
        arrivals = [];
        return new Response(body);
      }
      const url = new URL(req.url);
      if (url.pathname === "/reset") {
        got = 0;
        arrivals = [];
        return new Response("ok");
      }
      const body = await req.text();
      got++;
      const m = /"memoryId":"([^"]+)"/.exec(body);
      if (m) arrivals.push([m[1], now()]);
      return new Response("ok");
    },
  }),
);
console.log(JSON.stringify({ ports: servers.map((s) => s.port) }));

export {};
