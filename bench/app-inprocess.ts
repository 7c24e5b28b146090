// Micro-benchmark of the HTTP side of a raw store without sockets: CPU µs per POST /v1/memory
// through the app's own handler (app.handle), 64 in flight, against a bare handler that parses
// the same body and answers small JSON, alternating. `--fake-storage` answers apply() from the
// shared planner without writing, which leaves the request pipeline, validation, the route and
// the answer; without it, the LMDB store (data dir on /dev/shm) is included. `--direct` calls the
// direct route (http/direct.ts) that the listening server answers the raw store with.
//   bun run bench/app-inprocess.ts [rounds] [--fake-storage] [--direct]
import { mkdtempSync, rmSync } from "node:fs";
import { parseArgs } from "node:util";
import { buildApp } from "../src/app";
import { CommitNotifier, notifyingStorage } from "../src/audit/notify";
import { loadConfig } from "../src/config/config";
import type { Core } from "../src/core";
import { rootKeyFromSecret } from "../src/keys/service";
import { createLogger } from "../src/log";
import { openLmdb } from "../src/storage/lmdb/index";
import { planOp } from "../src/storage/ops";
import type { Storage } from "../src/storage/storage";

const { values, positionals } = parseArgs({
  args: process.argv.slice(2),
  options: { "fake-storage": { type: "boolean" }, direct: { type: "boolean" } },
  allowPositionals: true,
});
const secret = "memd_bench_root_key_0123456789abcdef";
const dir = mkdtempSync("/dev/shm/memd-inproc-");
const config = loadConfig(["--data-dir", dir], { MEMD_API_KEY: secret, MEMD_LOG_LEVEL: "info" });
// Log lines are formatted as in the server, then dropped.
const logger = createLogger("info", () => {});
const lmdb = await openLmdb(dir);
let seq = 0;
const planned: Storage = Object.assign(Object.create(lmdb), {
  apply: async (ops: Parameters<Storage["apply"]>[0], actorKeyId: string | null) =>
    ops.map((op) => {
      const p = planOp(op, undefined, Date.now(), actorKeyId);
      return { event: { ...p.event, seq: ++seq }, memory: p.created! };
    }),
});
const notifier = new CommitNotifier();
const storage = notifyingStorage(values["fake-storage"] ? planned : lmdb, notifier);
const core: Core = { storage, notifier, config, logger };
const app = buildApp(core, { root: rootKeyFromSecret(secret) });
const body = JSON.stringify({
  namespace: "bench",
  entity: "user-1",
  content: "The user prefers green tea in the morning",
  infer: false,
});
const request = () =>
  new Request("http://127.0.0.1/v1/memory", {
    method: "POST",
    body,
    headers: { "content-type": "application/json", authorization: `Bearer ${secret}` },
  });
// The raw store's direct route (http/direct.ts), as the listening server serves it.
const direct = (app.config.serve as { routes: Record<string, { POST: (r: Request) => Promise<Response> }> }).routes[
  "/v1/memory"
].POST;
const bare = async (req: Request) => {
  const b = (await req.json()) as { content: string };
  return Response.json({ ok: true, length: b.content.length });
};

async function run(handle: (r: Request) => Promise<Response>, n: number) {
  const worker = async (k: number) => {
    for (let i = 0; i < k; i++) {
      const r = await handle(request());
      if (r.status !== 200) throw new Error(`${r.status} ${await r.text()}`);
      await r.text();
    }
  };
  await Promise.all(Array.from({ length: 64 }, () => worker(50))); // warm-up
  const c0 = process.cpuUsage();
  await Promise.all(Array.from({ length: 64 }, () => worker(n / 64)));
  const c = process.cpuUsage(c0);
  return (c.user + c.system) / n;
}

const rounds = Number(positionals[0] ?? 3);
for (let i = 1; i <= rounds; i++) {
  const ceiling = await run(bare, 64 * 500);
  const memd = await run(values.direct ? direct : (r) => app.handle(r), 64 * 300);
  console.log(
    `round ${i}: bare ${ceiling.toFixed(1)} µs, memd ${memd.toFixed(1)} µs CPU per request${values["fake-storage"] ? " (storage not written)" : ""}`,
  );
}
await lmdb.close();
rmSync(dir, { recursive: true, force: true });
process.exit(0);
