// A webhook receiver on 127.0.0.1 for the tests: Bun.serve, each delivery verified with the
// official `standardwebhooks` package, its answer chosen by the test (status, delay, down).
import { join } from "node:path";
import { Webhook } from "standardwebhooks";

export interface Received {
  id: string;
  seq: number;
  type: string;
  body: any;
  verified: boolean;
}

export interface Receiver {
  url: string;
  port: number;
  /** Every delivery answered 2xx, in arrival order. */
  accepted: Received[];
  /** Every request that arrived, whatever it was answered. */
  arrivals: number;
  /** How the next requests are answered: a status, after `delayMs`. */
  answer: { status: number; delayMs: number };
  /** While set, requests are answered once it resolves (after their delay). */
  hold: Promise<void> | undefined;
  /** The secret deliveries are verified with (set once the subscription is made). */
  secret: string;
  /** Stops listening (connections are refused) until start() on the same port. */
  stop(): Promise<void>;
  start(): void;
  /** Resolves once `accepted` holds a delivery of every seq in `seqs` (bounded), else throws saying what is missing. */
  waitFor(seqs: number[], timeoutMs?: number): Promise<void>;
}

export function startReceiver(port = 0): Receiver {
  let server: ReturnType<typeof Bun.serve> | undefined;
  const r: Receiver = {
    url: "",
    port,
    accepted: [],
    arrivals: 0,
    answer: { status: 200, delayMs: 0 },
    hold: undefined,
    secret: "",
    async stop() {
      await server?.stop(true);
      server = undefined;
    },
    start() {
      server = Bun.serve({
        hostname: "127.0.0.1",
        port: r.port,
        fetch: async (req) => {
          r.arrivals++;
          const text = await req.text();
          const { status, delayMs } = r.answer;
          if (delayMs > 0) await Bun.sleep(delayMs);
          await r.hold;
          if (status >= 200 && status < 300) {
            const headers = Object.fromEntries(req.headers);
            let verified = false;
            try {
              new Webhook(r.secret).verify(text, headers);
              verified = true;
            } catch {}
            const body = JSON.parse(text);
            r.accepted.push({ id: headers["webhook-id"], seq: body.data.seq, type: body.type, body, verified });
          }
          return new Response(status >= 200 && status < 300 ? "ok" : "nope", { status });
        },
      });
      r.port = server.port!;
      r.url = `http://127.0.0.1:${r.port}/hook`;
    },
    async waitFor(seqs, timeoutMs = 20_000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const got = new Set(r.accepted.map((a) => a.seq));
        const missing = seqs.filter((s) => !got.has(s));
        if (missing.length === 0) return;
        if (Date.now() > deadline)
          throw new Error(
            `not delivered within ${timeoutMs} ms: seqs ${missing.slice(0, 10).join(", ")} (${missing.length} missing)`,
          );
        await Bun.sleep(20);
      }
    },
  };
  r.start();
  return r;
}

/**
 * The checks every fault test makes: every expected seq delivered, each verified, first
 * deliveries in seq order, and any repeat of an event carrying the same webhook-id as its first.
 */
export function checkDeliveries(accepted: Received[], expected: number[]): string[] {
  const problems: string[] = [];
  const firstId = new Map<number, string>();
  let last = 0;
  for (const a of accepted) {
    if (!a.verified) problems.push(`seq ${a.seq}: signature did not verify`);
    const id = firstId.get(a.seq);
    if (id === undefined) {
      if (a.seq < last) problems.push(`seq ${a.seq} first delivered after seq ${last}`);
      last = Math.max(last, a.seq);
      firstId.set(a.seq, a.id);
    } else if (id !== a.id) problems.push(`seq ${a.seq} delivered again with another webhook-id (${id}, ${a.id})`);
  }
  for (const s of expected) if (!firstId.has(s)) problems.push(`seq ${s} never delivered`);
  return problems;
}

/** A self-signed certificate for `localhost` (openssl), valid a day: its files' paths in `dir`. */
export function selfSignedCert(dir: string): { cert: string; key: string } {
  const cert = join(dir, "cert.pem");
  const key = join(dir, "key.pem");
  const made = Bun.spawnSync(
    ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert, "-days", "1"].concat([
      "-subj",
      "/CN=localhost",
      "-addext",
      "subjectAltName=DNS:localhost",
    ]),
    { stderr: "pipe" },
  );
  if (made.exitCode !== 0) throw new Error(`openssl failed: ${made.stderr.toString()}`);
  return { cert, key };
}
