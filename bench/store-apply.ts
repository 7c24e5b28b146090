// Micro-benchmark of the LMDB half of a raw store: CPU µs per `apply` of one ADD (the op a raw
// store writes), 64 in flight at a time as under wrk, group-committed and flushed, with the
// keyword index on and off. Data dir on /dev/shm unless given, so the figure is CPU, not the
// disk. `bun run bench/store-apply.ts [ops] [dir]`.
import { mkdtempSync, rmSync } from "node:fs";
import { join } from "node:path";
import { openLmdb } from "../src/storage/lmdb/index";

const n = Number(process.argv[2] ?? 20000);
const root = process.argv[3] ?? "/dev/shm";

async function run(searchIndex: boolean) {
  const dir = mkdtempSync(join(root, "memd-apply-"));
  const s = await openLmdb(dir, { searchIndex });
  const one = () =>
    s.apply(
      [
        {
          event: "ADD",
          create: {
            id: Bun.randomUUIDv7(),
            namespace: "bench",
            entity: "user-1",
            content: "The user prefers green tea in the morning",
            category: "general",
            importance: 0.5,
          },
        },
      ],
      "root",
    );
  const worker = async (k: number) => {
    for (let i = 0; i < k; i++) await one();
  };
  await Promise.all(Array.from({ length: 64 }, () => worker(200))); // warm-up
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  await Promise.all(Array.from({ length: 64 }, () => worker(Math.ceil(n / 64))));
  const wall = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  await s.close();
  rmSync(dir, { recursive: true, force: true });
  const ops = 64 * Math.ceil(n / 64);
  return { cpuUs: (cpu.user + cpu.system) / ops, opsPerSec: (ops * 1000) / wall };
}

for (let round = 1; round <= 3; round++)
  for (const on of [true, false]) {
    const r = await run(on);
    console.log(
      `round ${round}: index ${on ? "on " : "off"}: ${r.cpuUs.toFixed(1)} µs CPU per apply, ${r.opsPerSec.toFixed(0)} applies/s`,
    );
  }
