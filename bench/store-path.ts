// Issue 13's figure, alone: server CPU per durable raw store and req/s at 64 connections, as
// ratios to the bare Bun.serve ceiling measured in the same run, alternating ceiling and memd.
// `bun run bench/store-path.ts [rounds] [--source] [--database-url URL]`. Server on CPU 0, wrk on CPU 1.
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";

const { values, positionals } = parseArgs({
  args: process.argv.slice(2),
  options: { source: { type: "boolean" }, "database-url": { type: "string" }, secs: { type: "string" } },
  allowPositionals: true,
});
const rounds = Number(positionals[0] ?? 3);
const secs = Number(values.secs ?? 5);
const repo = join(import.meta.dir, "..");
const memd = values.source ? [process.execPath, "run", join(repo, "src/main.ts")] : [join(repo, "dist/memd")];
const key = "memd_bench_root_key_0123456789abcdef";
const body = JSON.stringify({
  namespace: "bench",
  entity: "user-1",
  content: "The user prefers green tea in the morning",
  infer: false,
});
const ticks = 100; // USER_HZ

function cpuMs(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return ((Number(f[11]) + Number(f[12])) * 1000) / ticks;
}

async function start(cmd: string[], env: Record<string, string>, port: number) {
  const proc = Bun.spawn(["taskset", "-c", "0", ...cmd], {
    env: { PATH: process.env.PATH!, ...env },
    stdout: "ignore",
    stderr: "inherit",
  });
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 3000; i++) {
    try {
      if ((await fetch(`${url}/readyz`)).status === 200) return { proc, url };
    } catch {}
    await Bun.sleep(5);
  }
  throw new Error("server did not start");
}

function wrk(url: string): { rps: number; requests: number } {
  const script = join(tmpdir(), `memd-wrk-${process.pid}.lua`);
  Bun.write(
    script,
    `wrk.method="POST"\nwrk.body=${JSON.stringify(body)}\nwrk.headers["Content-Type"]="application/json"\nwrk.headers["Authorization"]="Bearer ${key}"\n`,
  );
  const p = Bun.spawnSync(["taskset", "-c", "1", "wrk", "-t1", "-c64", `-d${secs}s`, "-s", script, url]);
  const out = p.stdout.toString();
  const rps = Number(/Requests\/sec:\s+([\d.]+)/.exec(out)?.[1]);
  const requests = Number(/(\d+) requests in/.exec(out)?.[1]);
  if (!(rps > 0) || /Non-2xx/.test(out)) throw new Error(`wrk: ${out}`);
  return { rps, requests };
}

async function measure(cmd: string[], env: Record<string, string>, port: number, path: string) {
  const s = await start(cmd, env, port);
  try {
    wrk(`${s.url}${path}`); // warm-up
    const before = cpuMs(s.proc.pid);
    const r = wrk(`${s.url}${path}`);
    const cpuUs = ((cpuMs(s.proc.pid) - before) * 1000) / r.requests;
    return { rps: r.rps, cpuUs };
  } finally {
    s.proc.kill("SIGTERM");
    await s.proc.exited;
  }
}

let port = 14000 + Math.floor(Math.random() * 4000);
const rows: string[] = [];
for (let i = 0; i < rounds; i++) {
  const ceil = await measure(
    [process.execPath, "run", join(import.meta.dir, "ceiling.ts"), String(port)],
    {},
    port++,
    "/",
  );
  const dir = mkdtempSync(join(tmpdir(), "memd-bench-"));
  const storage = values["database-url"] ? ["--database-url", values["database-url"]] : [];
  const m = await measure(
    [...memd, "serve", "--port", String(port), "--data-dir", dir, ...storage],
    { MEMD_API_KEY: key, MEMD_LOG_LEVEL: "info" },
    port++,
    "/v1/memory",
  );
  rmSync(dir, { recursive: true, force: true });
  const line = `round ${i + 1}: ceiling ${ceil.rps.toFixed(0)} req/s ${ceil.cpuUs.toFixed(1)} µs/req; memd ${m.rps.toFixed(0)} req/s ${m.cpuUs.toFixed(1)} µs/req; req/s ${((100 * m.rps) / ceil.rps).toFixed(0)}% of ceiling; CPU ${(m.cpuUs / ceil.cpuUs).toFixed(2)}× ceiling`;
  console.log(line);
  rows.push(line);
}
