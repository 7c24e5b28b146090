// wrk, the load generator of the benchmarks (Debian's package; `make bench-deps`), run pinned to
// one CPU with the scripts of this folder; shared by bench/run.ts and bench/postgres.ts.
import { join } from "node:path";

export interface WrkResult {
  rps: number;
  p50: number;
  p99: number;
  errors: number;
}

const unitMs: Record<string, number> = { us: 0.001, ms: 1, s: 1000 };

/** Starts one wrk run pinned to `cpu` (a POST of `body` when given, else a GET); `finish()` waits and parses it, latencies in ms. */
export function startWrk(
  url: string,
  conns: number,
  o: { key: string; cpu: string; secs: number; body?: unknown; script?: string },
): { finish(): Promise<WrkResult> } {
  const script = o.script ?? (o.body === undefined ? "get.lua" : "post.lua");
  const args = ["taskset", "-c", o.cpu, "wrk", "-t1", `-c${conns}`, `-d${o.secs}s`, "--latency"];
  const p = Bun.spawn([...args, "-s", join(import.meta.dir, script), url], {
    env: { ...process.env, KEY: o.key, BODY: o.body === undefined ? "" : JSON.stringify(o.body) },
    stdout: "pipe",
    stderr: "pipe",
  });
  return {
    async finish() {
      const [out, err, code] = await Promise.all([
        new Response(p.stdout).text(),
        new Response(p.stderr).text(),
        p.exited,
      ]);
      if (code !== 0) throw new Error(`wrk failed: ${err}${out}`);
      return parseWrk(out);
    },
  };
}

/** One wrk run, waited for. */
export function wrk(
  url: string,
  conns: number,
  o: { key: string; cpu: string; secs: number; body?: unknown; script?: string },
) {
  return startWrk(url, conns, o).finish();
}

function parseWrk(out: string): WrkResult {
  const pct = (n: string) => {
    const m = new RegExp(`^\\s+${n}%\\s+([\\d.]+)(us|ms|s)\\s*$`, "m").exec(out);
    return m ? Number(m[1]) * unitMs[m[2]] : Number.NaN;
  };
  const errs = /Non-2xx or 3xx responses: (\d+)/.exec(out);
  const sock = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(out);
  return {
    rps: Number(/Requests\/sec:\s+([\d.]+)/.exec(out)?.[1]),
    p50: pct("50"),
    p99: pct("99"),
    errors: Number(errs?.[1] ?? 0) + (sock ? sock.slice(1).reduce((a, b) => a + Number(b), 0) : 0),
  };
}
