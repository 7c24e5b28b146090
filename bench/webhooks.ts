// Webhook delivery: `bun run bench/webhooks.ts` (runs by itself; `make bench` also calls
// webhookBench from bench/run.ts), against a running memd started with --webhook-allow-private.
// Receivers (Bun.serve, answering 200 at once) and writers share this process and its clock.
//   1. Throughput: N events stored while the subscription is paused, then resumed: events per
//      second delivered to the fast receiver until the last one arrives.
//   2. Lag: raw stores from `writers` connections at full speed for `seconds` while one subscription
//      delivers them: from a store's answer at the writer to its delivery at the receiver (p50, p99).
//   3. Store path: raw stores per second with no subscription, then with ten active ones (each
//      wanting every event), then none again; the ratio against the mean of the two without.
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

export interface WebhookFigures {
  backlog: number;
  backlogDeliveredPerSec: number;
  lagStores: number;
  lagStoresPerSec: number;
  lagP50Ms: number;
  lagP99Ms: number;
  lagComplete: boolean;
  storesPerSecNone: number;
  storesPerSecTen: number;
  tenComplete: boolean;
  /** Ten active subscriptions to other namespaces: the store path's own cost, nothing to deliver. */
  storesPerSecTenIdle: number;
}

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] : Number.NaN;
};

/** A receiver answering 200 at once; calls `onEvent` with each delivery's memory id. */
function fastReceiver(onEvent: (memoryId: string) => void) {
  return Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    async fetch(req) {
      const body = await req.text();
      const m = /"memoryId":"([^"]+)"/.exec(body);
      if (m) onEvent(m[1]);
      return new Response("ok");
    },
  });
}

export async function webhookBench(
  url: string,
  key: string,
  opts: { seconds?: number; writers?: number; backlog?: number } = {},
): Promise<WebhookFigures> {
  const seconds = opts.seconds ?? 5;
  const writers = opts.writers ?? 32;
  const backlog = opts.backlog ?? 5000;
  const headers = { authorization: `Bearer ${key}`, "content-type": "application/json" };
  const call = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(url + path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${await res.text()}`);
    return res.json() as Promise<{ id: string; memories: { id: string }[] }>;
  };
  const storeFor = (namespace: string) => async (n: number) => {
    const r = await call("POST", "/v1/memory", {
      namespace,
      entity: `e${n % 50}`,
      content: `webhook bench ${n}`,
      infer: false,
    });
    return r.memories[0].id as string;
  };
  /** Raw stores from `writers` connections for `seconds`; answers the stores and, per id, when answered. */
  const fullSpeed = async (namespace: string, onAnswer?: (id: string, at: number) => void) => {
    const store = storeFor(namespace);
    let n = 0;
    const t0 = performance.now();
    const deadline = t0 + seconds * 1000;
    await Promise.all(
      Array.from({ length: writers }, async () => {
        while (performance.now() < deadline) {
          const id = await store(n++);
          onAnswer?.(id, performance.now());
        }
      }),
    );
    return { stores: n, perSec: n / ((performance.now() - t0) / 1000) };
  };
  const waitUntil = async (done: () => boolean, limitMs = 60_000) => {
    const end = performance.now() + limitMs;
    while (!done() && performance.now() < end) await Bun.sleep(2);
    return done();
  };

  // 1. Throughput from a backlog.
  const ns1 = `wh-bench-backlog-${Date.now()}`;
  let got1 = 0;
  let lastAt = 0;
  const r1 = fastReceiver(() => {
    got1++;
    lastAt = performance.now();
  });
  const hook1 = await call("POST", "/v1/webhooks", { url: `http://127.0.0.1:${r1.port}/`, namespaces: ns1 });
  await call("PATCH", `/v1/webhooks/${hook1.id}`, { state: "paused" });
  const store1 = storeFor(ns1);
  let k = 0;
  await Promise.all(
    Array.from({ length: writers }, async () => {
      while (k < backlog) await store1(k++);
    }),
  );
  const resumedAt = performance.now();
  await call("PATCH", `/v1/webhooks/${hook1.id}`, { state: "active" });
  await waitUntil(() => got1 >= backlog, 120_000);
  const backlogDeliveredPerSec = got1 / ((lastAt - resumedAt) / 1000);
  await call("DELETE", `/v1/webhooks/${hook1.id}`);
  r1.stop(true);

  // 2. Lag while stores run at full speed.
  const ns2 = `wh-bench-lag-${Date.now()}`;
  const answered = new Map<string, number>();
  const arrivedFirst = new Map<string, number>();
  const lags: number[] = [];
  let got2 = 0;
  const r2 = fastReceiver((id) => {
    got2++;
    const now = performance.now();
    const at = answered.get(id);
    if (at === undefined) arrivedFirst.set(id, now);
    else lags.push(now - at);
  });
  const hook2 = await call("POST", "/v1/webhooks", { url: `http://127.0.0.1:${r2.port}/`, namespaces: ns2 });
  const lag = await fullSpeed(ns2, (id, at) => {
    const first = arrivedFirst.get(id);
    if (first !== undefined) lags.push(first - at);
    else answered.set(id, at);
  });
  const lagComplete = await waitUntil(() => got2 >= lag.stores);
  await call("DELETE", `/v1/webhooks/${hook2.id}`);
  r2.stop(true);

  // 3. The store path with none, ten, and none again.
  const ns3 = `wh-bench-path-${Date.now()}`;
  const none1 = await fullSpeed(`${ns3}-a`);
  const idleReceiver = fastReceiver(() => {});
  const idleHooks = await Promise.all(
    Array.from({ length: 10 }, (_, i) =>
      call("POST", "/v1/webhooks", { url: `http://127.0.0.1:${idleReceiver.port}/`, namespaces: `elsewhere-${i}` }),
    ),
  );
  const tenIdle = await fullSpeed(`${ns3}-idle`);
  for (const h of idleHooks) await call("DELETE", `/v1/webhooks/${h.id}`);
  idleReceiver.stop(true);
  let got3 = 0;
  const receivers = Array.from({ length: 10 }, () => fastReceiver(() => got3++));
  const hooks = await Promise.all(
    receivers.map((r) => call("POST", "/v1/webhooks", { url: `http://127.0.0.1:${r.port}/`, namespaces: `${ns3}/*` })),
  );
  const ten = await fullSpeed(`${ns3}/b`);
  const tenComplete = await waitUntil(() => got3 >= ten.stores * 10, 120_000);
  for (const h of hooks) await call("DELETE", `/v1/webhooks/${h.id}`);
  for (const r of receivers) r.stop(true);
  const none2 = await fullSpeed(`${ns3}-c`);

  return {
    backlog,
    backlogDeliveredPerSec,
    lagStores: lag.stores,
    lagStoresPerSec: lag.perSec,
    lagP50Ms: pct(lags, 50),
    lagP99Ms: pct(lags, 99),
    lagComplete,
    storesPerSecNone: (none1.perSec + none2.perSec) / 2,
    storesPerSecTen: ten.perSec,
    tenComplete,
    storesPerSecTenIdle: tenIdle.perSec,
  };
}

/** The figures as markdown. */
export function webhookTable(f: WebhookFigures): string[] {
  return [
    "| figure | value |",
    "|---|---|",
    `| events/s delivered to a fast receiver (a backlog of ${f.backlog.toLocaleString("en-US")}) | ${f.backlogDeliveredPerSec.toFixed(0)} |`,
    `| delivery lag p50 / p99 while raw stores run at ${f.lagStoresPerSec.toFixed(0)}/s | ${f.lagP50Ms.toFixed(1)} ms / ${f.lagP99Ms.toFixed(1)} ms (all delivered: ${f.lagComplete ? "yes" : "no"}) |`,
    `| raw stores/s, no subscription (mean of before and after) | ${f.storesPerSecNone.toFixed(0)} |`,
    `| raw stores/s, ten active subscriptions to other namespaces (the store path's own cost) | ${f.storesPerSecTenIdle.toFixed(0)} (${((100 * f.storesPerSecTenIdle) / f.storesPerSecNone).toFixed(0)}% of none) |`,
    `| raw stores/s, ten subscriptions delivering every event | ${f.storesPerSecTen.toFixed(0)} (${((100 * f.storesPerSecTen) / f.storesPerSecNone).toFixed(0)}% of none; all delivered: ${f.tenComplete ? "yes" : "no"}) |`,
  ];
}

if (import.meta.main) {
  const root = join(import.meta.dir, "..");
  const key = "memd_bench_root_key_0123456789abcdef";
  const dir = mkdtempSync(join(tmpdir(), "memd-webhook-bench-"));
  const bin = join(root, "dist/memd");
  const cmd =
    existsSync(bin) && !process.env.BENCH_SOURCE ? [bin] : [process.execPath, "run", join(root, "src/main.ts")];
  const proc = Bun.spawn(
    [...cmd, "serve", "--port", "0", "--data-dir", dir, "--webhook-allow-private", ...process.argv.slice(2)],
    {
      env: { ...process.env, MEMD_API_KEY: key, MEMD_LOG_LEVEL: "info" },
      stdout: "pipe",
      stderr: "inherit",
    },
  );
  let out = "";
  const reader = (async () => {
    for await (const c of proc.stdout) {
      if (out.length < 4096) out += new TextDecoder().decode(c);
    }
  })();
  let url: string | undefined;
  for (let i = 0; i < 3000 && !url; i++) {
    url = /"msg":"memd started".*"address":"(http:\/\/[^"]+)"/.exec(out)?.[1];
    if (!url) await Bun.sleep(10);
  }
  if (!url) throw new Error(`memd did not start: ${out}`);
  const seconds = Number(process.env.BENCH_SECONDS ?? 5);
  console.log(webhookTable(await webhookBench(url, key, { seconds })).join("\n"));
  proc.kill("SIGTERM");
  await proc.exited;
  await reader;
  rmSync(dir, { recursive: true, force: true });
}
