// Live change stream throughput and delay: `bun run bench/stream.ts` (runs by itself; `make bench`
// also calls streamBench from bench/run.ts). While raw stores run at full speed from `writers`
// concurrent connections, 1 and then 10 subscribers follow the namespace's stream. Reported: events
// delivered per second per subscriber and in total, and the delay from a store's answer arriving at
// the writer to its event arriving at a subscriber (p50, p99; negative when the event won the race).
// Writers and subscribers share this process and its clock.
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

export interface StreamFigures {
  subscribers: number;
  stores: number;
  storesPerSec: number;
  deliveredPerSec: number;
  perSubscriberPerSec: number;
  delayP50Ms: number;
  delayP99Ms: number;
  complete: boolean;
}

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] : Number.NaN;
};

/** Runs one round against a running memd at `url` with `key`, in a fresh namespace. */
export async function streamBench(
  url: string,
  key: string,
  subscribers: number,
  opts: { seconds?: number; writers?: number } = {},
): Promise<StreamFigures> {
  const seconds = opts.seconds ?? 5;
  const writers = opts.writers ?? 32;
  const namespace = `stream-bench-${subscribers}-${Date.now()}`;
  const headers = { authorization: `Bearer ${key}` };
  const answeredAt = new Map<string, number>();
  const delays: number[] = [];
  const counts = new Array(subscribers).fill(0);
  const aborts: AbortController[] = [];
  const lastSeen: Promise<void>[] = [];
  let target = Number.POSITIVE_INFINITY;
  let onProgress = () => {};

  for (let i = 0; i < subscribers; i++) {
    const abort = new AbortController();
    aborts.push(abort);
    const res = await fetch(`${url}/v1/memory/events/stream?namespace=${namespace}`, { headers, signal: abort.signal });
    if (res.status !== 200) throw new Error(`stream: ${res.status}`);
    lastSeen.push(
      (async () => {
        const dec = new TextDecoder();
        let buf = "";
        try {
          for await (const chunk of res.body!) {
            buf += dec.decode(chunk, { stream: true });
            let end = buf.indexOf("\n\n");
            while (end !== -1) {
              const block = buf.slice(0, end);
              buf = buf.slice(end + 2);
              const data = block.indexOf("\ndata: ");
              if (data !== -1 && block.includes("event: memory")) {
                counts[i]++;
                if (i === 0) {
                  // One subscriber's delays are enough, and cheap to collect.
                  const memoryId = block.slice(data + 7).match(/"memoryId":"([^"]+)"/)![1];
                  const at = answeredAt.get(memoryId);
                  if (at !== undefined) delays.push(performance.now() - at);
                  else answeredAt.set(memoryId, -performance.now()); // arrived first; the answer settles it
                }
              }
              end = buf.indexOf("\n\n");
            }
            if (counts[i] >= target) onProgress();
          }
        } catch {}
      })(),
    );
  }

  let stores = 0;
  const body = (n: number) =>
    JSON.stringify({ namespace, entity: `e${n % 50}`, content: `stream bench ${n}`, infer: false });
  const t0 = performance.now();
  const deadline = t0 + seconds * 1000;
  await Promise.all(
    Array.from({ length: writers }, async () => {
      while (performance.now() < deadline) {
        const res = await fetch(`${url}/v1/memory`, {
          method: "POST",
          headers: { ...headers, "content-type": "application/json" },
          body: body(stores),
        });
        const json = (await res.json()) as { memories: { id: string }[] };
        const now = performance.now();
        const id = json.memories[0].id;
        const early = answeredAt.get(id);
        if (early !== undefined) delays.push(-early - now);
        else answeredAt.set(id, now);
        stores++;
      }
    }),
  );
  const writeSecs = (performance.now() - t0) / 1000;
  // Let the subscribers drain what was written (bounded).
  target = stores;
  const drained = new Promise<void>((resolve) => {
    onProgress = () => counts.every((c) => c >= stores) && resolve();
    onProgress();
  });
  await Promise.race([drained, Bun.sleep(30_000)]);
  const totalSecs = (performance.now() - t0) / 1000;
  for (const a of aborts) a.abort();
  await Promise.all(lastSeen);
  const delivered = counts.reduce((a, b) => a + b, 0);
  return {
    subscribers,
    stores,
    storesPerSec: stores / writeSecs,
    deliveredPerSec: delivered / totalSecs,
    perSubscriberPerSec: delivered / subscribers / totalSecs,
    delayP50Ms: pct(delays, 50),
    delayP99Ms: pct(delays, 99),
    complete: counts.every((c) => c === stores),
  };
}

/** A markdown table of rounds. */
export function streamTable(rows: StreamFigures[]): string[] {
  return [
    "| subscribers | raw stores/s | events/s delivered (all) | per subscriber | delay p50 | delay p99 | all delivered |",
    "|---|---|---|---|---|---|---|",
    ...rows.map(
      (r) =>
        `| ${r.subscribers} | ${r.storesPerSec.toFixed(0)} | ${r.deliveredPerSec.toFixed(0)} | ${r.perSubscriberPerSec.toFixed(0)} | ${r.delayP50Ms.toFixed(1)} ms | ${r.delayP99Ms.toFixed(1)} ms | ${r.complete ? "yes" : "no"} |`,
    ),
  ];
}

if (import.meta.main) {
  const root = join(import.meta.dir, "..");
  const key = "memd_bench_root_key_0123456789abcdef";
  const dir = mkdtempSync(join(tmpdir(), "memd-stream-bench-"));
  const bin = join(root, "dist/memd");
  const cmd = existsSync(bin) ? [bin] : [process.execPath, "run", join(root, "src/main.ts")];
  const proc = Bun.spawn([...cmd, "serve", "--port", "0", "--data-dir", dir], {
    env: { ...process.env, MEMD_API_KEY: key, MEMD_LOG_LEVEL: "info" },
    stdout: "pipe",
    stderr: "inherit",
  });
  let out = "";
  const reader = (async () => {
    for await (const c of proc.stdout) {
      if (out.length < 4096) out += new TextDecoder().decode(c);
    }
  })();
  let url: string | undefined;
  for (let i = 0; i < 2000 && !url; i++) {
    url = /"msg":"memd started".*"address":"(http:\/\/[^"]+)"/.exec(out)?.[1];
    if (!url) await Bun.sleep(10);
  }
  if (!url) throw new Error(`memd did not start: ${out}`);
  const seconds = Number(process.env.BENCH_SECONDS ?? 5);
  const rows = [await streamBench(url, key, 1, { seconds }), await streamBench(url, key, 10, { seconds })];
  console.log(streamTable(rows).join("\n"));
  proc.kill("SIGTERM");
  await proc.exited;
  await reader;
  rmSync(dir, { recursive: true, force: true });
}
