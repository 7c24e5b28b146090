// Webhook receivers for bench/webhooks.ts, in a process of their own (so they do not share the
// bench's event loop with the writers): `bun run bench/webhook-receivers.ts <n>` starts n
// receivers on 127.0.0.1 answering 200 at once, and prints their ports and a control port as one
// JSON line. The control port answers GET /stats: the deliveries counted by the whole process, and
// the arrivals (memory id, time since the epoch in ms, sub-millisecond) since the last GET /stats;
// POST /reset sets the count to 0.
//
// A receiver is a plain socket reading HTTP/1.1 requests by Content-Length, not Bun.serve: on the
// bench's two cores the receivers stand in for other machines, and Bun.serve took 16-24 µs of CPU
// a request against 6.5-8 here (same run), ten a store beside the writers.
const n = Number(process.argv[2] ?? 10);
let got = 0;
let arrivals: [string, number][] = [];
const now = () => performance.timeOrigin + performance.now();
const ok = Buffer.from("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
const headEnd = Buffer.from("\r\n\r\n");

/** What a connection has read and not yet answered. */
type Pending = { buf: Buffer | undefined };

const servers = Array.from({ length: n }, () =>
  Bun.listen<Pending>({
    hostname: "127.0.0.1",
    port: 0,
    socket: {
      open(s) {
        s.data = { buf: undefined };
      },
      data(s, chunk) {
        let buf = s.data.buf ? Buffer.concat([s.data.buf, chunk]) : Buffer.from(chunk);
        for (;;) {
          const end = buf.indexOf(headEnd);
          if (end < 0) break;
          const length = Number(/\r\ncontent-length:\s*(\d+)/i.exec(buf.subarray(0, end).toString("latin1"))?.[1] ?? 0);
          if (buf.byteLength < end + 4 + length) break;
          const body = buf.subarray(end + 4, end + 4 + length).toString("utf8");
          buf = buf.subarray(end + 4 + length);
          got++;
          const m = /"memoryId":"([^"]+)"/.exec(body);
          if (m) arrivals.push([m[1], now()]);
          s.write(ok);
        }
        s.data.buf = buf.byteLength > 0 ? buf : undefined;
      },
    },
  }),
);
const control = Bun.serve({
  hostname: "127.0.0.1",
  port: 0,
  fetch(req) {
    if (req.method === "GET") {
      const body = JSON.stringify({ got, arrivals });
      arrivals = [];
      return new Response(body);
    }
    got = 0;
    arrivals = [];
    return new Response("ok");
  },
});
console.log(JSON.stringify({ ports: servers.map((s) => s.port), control: control.port }));

export {};
