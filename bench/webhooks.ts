// Webhook delivery: `bun run bench/webhooks.ts` (runs by itself; `make bench` also calls
// webhookBench from bench/run.ts), against a running memd started with --webhook-allow-private.
// The receivers (plain sockets answering 200 at once) run in a process of their own
// (bench/webhook-receivers.ts), so they do not share the writers' event loop; the lag is timed by
// the clock since the epoch, which both processes read.
//   1. Throughput: N events stored while the subscription is paused, then resumed: events per
//      second delivered to the fast receiver until the last one arrives.
//   2. Lag: raw stores from `writers` connections at full speed for `seconds` while one subscription
//      delivers them: from a store's answer at the writer to its delivery at the receiver (p50, p99).
//   3. Store path: `rounds` of (none, ten active subscriptions to other namespaces, none, ten
//      each delivering every event, none): raw stores per second of each run with ten against the
//      mean of the two runs without beside it, the same server (so the same embedder setting)
//      throughout. With memd's pid, also the CPU a store of its request thread (the process's
//      main thread) and of the whole process, from /proc, in each kind of run. Its receivers are
//      a second process at nice 19, so that they take little CPU from the writers (their share
//      of the machine is reported), and the share of the events delivered within each run.
//      With `today` (a server of the code when issue 34 was filed, b09d4a9, no webhooks:
//      BENCH_TODAY_BIN here, BENCH_TODAY in make bench), each round also runs raw stores on it
//      right before and after the run with ten delivering: that run against today's code.
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createDatabase } from "../test/helpers";

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
  /** Each round's stores/s with ten delivering, over the mean of the runs without beside it. */
  tenRatios: number[];
  tenComplete: boolean;
  /** Seconds after the last store until the ten subscriptions had every event. */
  tenCatchUpSec: number;
  /** Ten active subscriptions to other namespaces: the store path's own cost, nothing to deliver. */
  storesPerSecTenIdle: number;
  /** Each round's stores/s with ten to other namespaces, over the mean of the runs without beside it. */
  idleRatios: number[];
  /** The store path's receivers' share of the machine's CPU during the runs with ten delivering (median). */
  receiversShare: number;
  /** The share of the ten subscriptions' deliveries made by the end of the run that stored their events (median). */
  tenDeliveredInRun: number;
  /** CPU ms a store (median over the rounds) of memd's request thread and of the whole process, when its pid was given. */
  cpu?: Record<"none" | "idle" | "ten", { thread: number; process: number }>;
  /** Each round's run with ten delivering against today's code's raw stores right before and after it: stores/s, and the process's CPU a store. */
  today?: { storesPerSec: number; ratios: number[]; cpuRatios: number[] };
}

/** A running memd: its URL and, for CPU figures, its pid. */
export interface BenchServer {
  url: string;
  pid?: number;
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] : Number.NaN;
};

/**
 * The receivers' process (at `nice` when above 0): its ports, its count so far, and the arrivals
 * since the last look. Not lower than nice 19 in the bench's own session: in a session of their own
 * at the lowest priority (autogroup nice 19, idle class) a busy machine starves them, memd's
 * deliveries wait for their answers, and the delivery work leaves the measured runs (20-45 s of
 * catch-up after 2 s of stores): not what receivers on other machines do.
 */
async function startReceivers(n: number, nice = 0) {
  const niced = nice > 0 ? ["nice", "-n", String(nice)] : [];
  const cmd = [...niced, process.execPath, "run", join(import.meta.dir, "webhook-receivers.ts"), String(n)];
  const proc = Bun.spawn(cmd, {
    stdout: "pipe",
    stderr: "inherit",
  });
  const reader = proc.stdout.getReader();
  let out = "";
  while (!out.includes("\n")) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`the receivers did not start: ${out}`);
    out += new TextDecoder().decode(value);
  }
  reader.releaseLock();
  const { ports, control: controlPort } = JSON.parse(out.split("\n")[0]) as { ports: number[]; control: number };
  const control = `http://127.0.0.1:${controlPort}`;
  return {
    pid: proc.pid,
    urls: ports.map((p) => `http://127.0.0.1:${p}/`),
    stats: async () =>
      (await (await fetch(`${control}/stats`)).json()) as { got: number; arrivals: [string, number][] },
    reset: async () => void (await fetch(`${control}/reset`, { method: "POST" })),
    stop: async () => {
      proc.kill("SIGTERM");
      await proc.exited;
    },
  };
}

export async function webhookBench(
  url: string,
  key: string,
  opts: {
    seconds?: number;
    writers?: number;
    backlog?: number;
    rounds?: number;
    pid?: number;
    today?: BenchServer;
  } = {},
): Promise<WebhookFigures> {
  const seconds = opts.seconds ?? 5;
  const writers = opts.writers ?? 32;
  const backlog = opts.backlog ?? 5000;
  const rounds = opts.rounds ?? 3;
  const headers = { authorization: `Bearer ${key}`, "content-type": "application/json" };
  const call = async (method: string, path: string, body?: unknown, base = url) => {
    const res = await fetch(base + path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${await res.text()}`);
    return res.json() as Promise<{ id: string; memories: { id: string }[] }>;
  };
  const storeFor =
    (namespace: string, base = url) =>
    async (n: number) => {
      const r = await call(
        "POST",
        "/v1/memory",
        { namespace, entity: `e${n % 50}`, content: `webhook bench ${n}`, infer: false },
        base,
      );
      return r.memories[0].id as string;
    };
  const cores = navigator.hardwareConcurrency;
  /** CPU ms so far of memd's request thread and of its whole process (utime + stime, from /proc). */
  const tick = 1000 / 100; // USER_HZ
  const cpuOf = async (path: string) => {
    const f = (await Bun.file(path).text()).split(") ")[1].split(" ");
    return (Number(f[11]) + Number(f[12])) * tick;
  };
  const cpuNow = async (pid = opts.pid) =>
    pid === undefined
      ? undefined
      : {
          thread: await cpuOf(`/proc/${pid}/task/${pid}/stat`),
          process: await cpuOf(`/proc/${pid}/stat`),
        };
  /** Raw stores from `writers` connections for `seconds` (on `server`); answers the stores and, per id, when answered. */
  const fullSpeed = async (
    namespace: string,
    onAnswer?: (id: string) => void,
    server: BenchServer = { url, pid: opts.pid },
  ) => {
    const store = storeFor(namespace, server.url);
    let n = 0;
    const cpu0 = await cpuNow(server.pid);
    const rx0 = await cpuOf(`/proc/${rxPath.pid}/stat`);
    const t0 = performance.now();
    const deadline = t0 + seconds * 1000;
    await Promise.all(
      Array.from({ length: writers }, async () => {
        while (performance.now() < deadline) {
          const id = await store(n++);
          onAnswer?.(id);
        }
      }),
    );
    const elapsed = performance.now() - t0;
    const perSec = n / (elapsed / 1000);
    // The store path's receivers' CPU over the run, as a share of the machine's.
    const rxShare = ((await cpuOf(`/proc/${rxPath.pid}/stat`)) - rx0) / (elapsed * cores);
    const cpu1 = await cpuNow(server.pid);
    const cpu =
      cpu0 && cpu1
        ? { thread: (cpu1.thread - cpu0.thread) / n, process: (cpu1.process - cpu0.process) / n }
        : undefined;
    return { stores: n, perSec, cpu, rxShare };
  };
  const rx = await startReceivers(10);
  // The store path's receivers run at the lowest priority: on a machine of two cores, ten POSTs a
  // store answered beside the writers would take the writers' CPU (in a deployment, receivers are
  // other machines); what they are sent waits for them, and the catch-up time shows it.
  const rxPath = await startReceivers(10, 19);
  const now = () => performance.timeOrigin + performance.now();
  /** Polls the receivers until `done` holds of their count (bounded); answers whether it did. */
  const waitFor = async (
    done: (got: number) => boolean,
    limitMs = 60_000,
    onArrivals?: (a: [string, number][]) => void,
    receivers = rx,
  ) => {
    const end = performance.now() + limitMs;
    for (;;) {
      const st = await receivers.stats();
      onArrivals?.(st.arrivals);
      if (done(st.got)) return true;
      if (performance.now() > end) return false;
      await Bun.sleep(5);
    }
  };

  try {
    // 1. Throughput from a backlog.
    const ns1 = `wh-bench-backlog-${Date.now()}`;
    const hook1 = await call("POST", "/v1/webhooks", { url: rx.urls[0], namespaces: ns1 });
    await call("PATCH", `/v1/webhooks/${hook1.id}`, { state: "paused" });
    const store1 = storeFor(ns1);
    let k = 0;
    await Promise.all(
      Array.from({ length: writers }, async () => {
        while (k < backlog) await store1(k++);
      }),
    );
    await rx.reset();
    const resumedAt = now();
    await call("PATCH", `/v1/webhooks/${hook1.id}`, { state: "active" });
    let lastAt = resumedAt;
    await waitFor(
      (got) => got >= backlog,
      120_000,
      (a) => {
        if (a.length) lastAt = a[a.length - 1][1];
      },
    );
    const backlogDeliveredPerSec = backlog / ((lastAt - resumedAt) / 1000);
    await call("DELETE", `/v1/webhooks/${hook1.id}`);

    // 2. Lag while stores run at full speed.
    const ns2 = `wh-bench-lag-${Date.now()}`;
    await rx.reset();
    const answered = new Map<string, number>();
    const hook2 = await call("POST", "/v1/webhooks", { url: rx.urls[1], namespaces: ns2 });
    const lag = await fullSpeed(ns2, (id) => answered.set(id, now()));
    const arrived = new Map<string, number>();
    const lagComplete = await waitFor(
      (got) => got >= lag.stores,
      60_000,
      (a) => {
        for (const [id, t] of a) if (!arrived.has(id)) arrived.set(id, t);
      },
    );
    const lags = [...answered].flatMap(([id, at]) => {
      const t = arrived.get(id);
      return t === undefined ? [] : [t - at];
    });
    await call("DELETE", `/v1/webhooks/${hook2.id}`);

    // 3. The store path: `rounds` of (none, ten to other namespaces, none, ten delivering every
    // event until all are delivered, none), each run with ten against the mean of the nones beside it.
    const ns3 = `wh-bench-path-${Date.now()}`;
    type Run = Awaited<ReturnType<typeof fullSpeed>>;
    const nones: Run[] = [await fullSpeed(`${ns3}-n0`)];
    const idles: Run[] = [];
    const tens: Run[] = [];
    let tenComplete = true;
    let tenCatchUpSec = 0;
    const inRun: number[] = [];
    const todays: [Run, Run][] = [];
    for (let round = 0; round < rounds; round++) {
      const idleHooks = await Promise.all(
        rxPath.urls.map((url, i) => call("POST", "/v1/webhooks", { url, namespaces: `elsewhere-${round}-${i}` })),
      );
      idles.push(await fullSpeed(`${ns3}-idle-${round}`));
      for (const h of idleHooks) await call("DELETE", `/v1/webhooks/${h.id}`);
      nones.push(await fullSpeed(`${ns3}-n${2 * round + 1}`));
      await rxPath.reset();
      const hooks = await Promise.all(
        rxPath.urls.map((url) => call("POST", "/v1/webhooks", { url, namespaces: `${ns3}-${round}/*` })),
      );
      const todayBefore = opts.today ? await fullSpeed(`${ns3}-today-${round}-a`, undefined, opts.today) : undefined;
      const ten = await fullSpeed(`${ns3}-${round}/b`);
      tens.push(ten);
      const tenEnd = performance.now();
      inRun.push((await rxPath.stats()).got / (ten.stores * 10));
      tenComplete = (await waitFor((got) => got >= ten.stores * 10, 180_000, undefined, rxPath)) && tenComplete;
      tenCatchUpSec = Math.max(tenCatchUpSec, (performance.now() - tenEnd) / 1000);
      if (opts.today && todayBefore)
        todays.push([todayBefore, await fullSpeed(`${ns3}-today-${round}-b`, undefined, opts.today)]);
      for (const h of hooks) await call("DELETE", `/v1/webhooks/${h.id}`);
      nones.push(await fullSpeed(`${ns3}-n${2 * round + 2}`));
    }
    const beside = (i: number) => (nones[i].perSec + nones[i + 1].perSec) / 2;
    const idleRatios = idles.map((r, i) => r.perSec / beside(2 * i));
    const ratios = tens.map((t, i) => t.perSec / beside(2 * i + 1));
    const mean = (runs: Run[]) => runs.reduce((a, r) => a + r.perSec, 0) / runs.length;
    const cpuOfRuns = (runs: Run[]) => ({
      thread: median(runs.map((r) => r.cpu!.thread)),
      process: median(runs.map((r) => r.cpu!.process)),
    });
    const cpu = nones[0].cpu ? { none: cpuOfRuns(nones), idle: cpuOfRuns(idles), ten: cpuOfRuns(tens) } : undefined;
    const today =
      todays.length > 0
        ? {
            storesPerSec: mean(todays.flat()),
            ratios: todays.map(([a, b], i) => tens[i].perSec / ((a.perSec + b.perSec) / 2)),
            cpuRatios: todays.flatMap(([a, b], i) =>
              a.cpu && b.cpu && tens[i].cpu ? [tens[i].cpu!.process / ((a.cpu.process + b.cpu.process) / 2)] : [],
            ),
          }
        : undefined;

    return {
      backlog,
      backlogDeliveredPerSec,
      lagStores: lag.stores,
      lagStoresPerSec: lag.perSec,
      lagP50Ms: pct(lags, 50),
      lagP99Ms: pct(lags, 99),
      lagComplete,
      storesPerSecNone: mean(nones),
      storesPerSecTen: mean(tens),
      tenRatios: ratios,
      tenComplete,
      tenCatchUpSec,
      storesPerSecTenIdle: mean(idles),
      idleRatios,
      receiversShare: median(tens.map((t) => t.rxShare)),
      tenDeliveredInRun: median(inRun),
      cpu,
      today,
    };
  } finally {
    await rx.stop();
    await rxPath.stop();
  }
}

const pcts = (rs: number[]) =>
  `${rs.map((r) => `${(100 * r).toFixed(0)}%`).join(", ")} of the runs without beside each (median ${(100 * median(rs)).toFixed(0)}%)`;

/** The figures as markdown; `todayLabel` names today's code when it ran. */
export function webhookTable(f: WebhookFigures, todayLabel = "today's code (b09d4a9)"): string[] {
  const vsNone = (k: "none" | "idle" | "ten") =>
    f.cpu && k !== "none" ? ` (${((100 * f.cpu[k].thread) / f.cpu.none.thread).toFixed(0)}% of none's)` : "";
  const cpu = (k: "none" | "idle" | "ten") =>
    f.cpu
      ? `; CPU a store ${f.cpu[k].thread.toFixed(3)} ms request thread${vsNone(k)}, ${f.cpu[k].process.toFixed(3)} ms process`
      : "";
  return [
    "| figure | value |",
    "|---|---|",
    `| events/s delivered to a fast receiver (a backlog of ${f.backlog.toLocaleString("en-US")}) | ${f.backlogDeliveredPerSec.toFixed(0)} |`,
    `| delivery lag p50 / p99 while raw stores run at ${f.lagStoresPerSec.toFixed(0)}/s | ${f.lagP50Ms.toFixed(1)} ms / ${f.lagP99Ms.toFixed(1)} ms (all delivered: ${f.lagComplete ? "yes" : "no"}) |`,
    `| raw stores/s, no subscription (mean of ${f.tenRatios.length * 2 + 1} runs) | ${f.storesPerSecNone.toFixed(0)}${cpu("none")} |`,
    `| raw stores/s, ten active subscriptions matching other namespaces (mean of ${f.idleRatios.length} runs) | ${f.storesPerSecTenIdle.toFixed(0)}: ${pcts(f.idleRatios)}${cpu("idle")} |`,
    `| raw stores/s, ten subscriptions delivering every event (mean of ${f.tenRatios.length} runs) | ${f.storesPerSecTen.toFixed(0)}: ${pcts(f.tenRatios)}${cpu("ten")}; ${(100 * f.tenDeliveredInRun).toFixed(0)}% delivered by the run's end (median), all: ${f.tenComplete ? `yes, at most ${f.tenCatchUpSec.toFixed(1)} s after the last store` : "no"} |`,
    `| the ten receivers' CPU while those stores run (a process of their own at nice 19) | ${(100 * f.receiversShare).toFixed(1)}% of the machine's (median) |`,
    ...(f.today
      ? [
          `| raw stores/s, ten delivering every event, against ${todayLabel} (its raw stores right before and after each run, the same rounds) | ${f.today.ratios.map((r) => `${(100 * r).toFixed(0)}%`).join(", ")} of today's ${f.today.storesPerSec.toFixed(0)}/s (median ${(100 * median(f.today.ratios)).toFixed(0)}%)${f.today.cpuRatios.length ? `; the process's CPU a store ${f.today.cpuRatios.map((r) => `${r.toFixed(2)}×`).join(", ")} today's (median ${median(f.today.cpuRatios).toFixed(2)}×)` : ""} |`,
        ]
      : []),
  ];
}

/** Starts `cmd serve` on a free port with `args`; its URL (from its "memd started" line) and process. */
async function serveBench(cmd: string[], args: string[], env: Record<string, string | undefined>) {
  const dir = mkdtempSync(join(tmpdir(), "memd-webhook-bench-"));
  const proc = Bun.spawn([...cmd, "serve", "--port", "0", "--data-dir", dir, ...args], {
    env: { ...process.env, MEMD_LOG_LEVEL: "info", ...env },
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
  for (let i = 0; i < 3000 && !url; i++) {
    url = /"msg":"memd started".*"address":"(http:\/\/[^"]+)"/.exec(out)?.[1];
    if (!url) await Bun.sleep(10);
  }
  if (!url) throw new Error(`memd did not start: ${out}`);
  return {
    url,
    pid: proc.pid,
    async stop() {
      proc.kill("SIGTERM");
      await proc.exited;
      await reader;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

if (import.meta.main) {
  const root = join(import.meta.dir, "..");
  const key = "memd_bench_root_key_0123456789abcdef";
  const bin = join(root, "dist/memd");
  const cmd =
    existsSync(bin) && !process.env.BENCH_SOURCE ? [bin] : [process.execPath, "run", join(root, "src/main.ts")];
  // BENCH_WEBHOOK_PG=1 under scripts/with-postgres: on a fresh database of its PostgreSQL.
  const pg = process.env.BENCH_WEBHOOK_PG === "1" ? process.env.MEMD_TEST_DATABASE_URL : undefined;
  const database = async () => (pg ? ["--database-url", await createDatabase(pg)] : []);
  // BENCH_SERVER_CPU=0: memd pinned to that CPU, as make bench pins it (run this process on another: taskset -c 1).
  const pin = process.env.BENCH_SERVER_CPU ? ["taskset", "-c", process.env.BENCH_SERVER_CPU] : [];
  // BENCH_TODAY_BIN: a binary of the code when issue 34 was filed (b09d4a9, e.g. /work/baseline/dist/memd),
  // run beside (its own data dir or database); both without an embedder, as that code had none.
  const todayBin = process.env.BENCH_TODAY_BIN;
  const env = { MEMD_API_KEY: key, ...(todayBin ? { MEMD_EMBEDDER: "none" } : {}) };
  const memd = await serveBench(
    [...pin, ...cmd],
    ["--webhook-allow-private", ...(await database()), ...process.argv.slice(2)],
    env,
  );
  const today = todayBin ? await serveBench([...pin, todayBin], await database(), env) : undefined;
  const seconds = Number(process.env.BENCH_SECONDS ?? 5);
  const rounds = Number(process.env.BENCH_WEBHOOK_ROUNDS ?? 3);
  const backlog = Number(process.env.BENCH_WEBHOOK_BACKLOG ?? 5000);
  try {
    const f = await webhookBench(memd.url, key, { seconds, rounds, backlog, pid: memd.pid, today });
    console.log(webhookTable(f, todayBin ? `today's code (${todayBin})` : undefined).join("\n"));
  } finally {
    await memd.stop();
    await today?.stop();
  }
}
