// Lifecycle benchmarks (issue 11): export and import rates and peak RSS at 1,000,000 memories,
// erase time for an entity of 10,000 memories, list paging p99 at 1,000,000 memories.
// Runs alone (`bun run bench/lifecycle.ts`, prints a Markdown section) and from bench/run.ts.
// BENCH_LIFECYCLE_MEMORIES changes the size; MEMD_BENCH_DATABASE_URL adds PostgreSQL rows.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openStorage } from "../src/storage/index";
import type { MemoryOp } from "../src/storage/storage";

const root = join(import.meta.dir, "..");
const key = "memd_bench_root_key_0123456789abcdef";
const f0 = (n: number) => Math.round(n).toLocaleString("en-US");
const ms = (n: number) => `${n.toFixed(2)} ms`;

interface Run {
  seconds: number;
  hwmMiB: number;
  anonMiB: number;
  stderr: string;
}

/** Runs a memd command to completion, sampling its memory (VmHWM, and the peak of RssAnon). */
async function measured(args: string[], env: Record<string, string> = {}): Promise<Run> {
  const started = performance.now();
  const proc = Bun.spawn([process.execPath, "run", join(root, "src/main.ts"), ...args], {
    env: { ...process.env, MEMD_DATABASE_URL: "", ...env },
    stdout: "ignore",
    stderr: "pipe",
  });
  let hwm = 0;
  let anon = 0;
  const sample = setInterval(async () => {
    try {
      const status = await Bun.file(`/proc/${proc.pid}/status`).text();
      const kb = (k: string) => Number(new RegExp(`^${k}:\\s+(\\d+) kB`, "m").exec(status)?.[1] ?? 0) / 1024;
      hwm = Math.max(hwm, kb("VmHWM"));
      anon = Math.max(anon, kb("RssAnon"));
    } catch {}
  }, 50);
  const stderr = await new Response(proc.stderr).text();
  const code = await proc.exited;
  clearInterval(sample);
  if (code !== 0) throw new Error(`memd ${args.join(" ")} failed (${code}): ${stderr}`);
  return { seconds: (performance.now() - started) / 1000, hwmMiB: hwm, anonMiB: anon, stderr };
}

function percentile(xs: number[], p: number) {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
}

/** Loads `count` memories into a store through apply (10,000 per transaction), `entities` entities. */
async function loadStore(settings: { dataDir: string; databaseUrl?: string }, count: number, entity?: string) {
  const storage = await openStorage(settings);
  const t0 = performance.now();
  const batch = settings.databaseUrl ? 2000 : 10_000;
  for (let done = 0; done < count; done += batch) {
    const ops: MemoryOp[] = [];
    for (let i = done; i < Math.min(count, done + batch); i++)
      ops.push({
        event: "ADD",
        create: {
          id: Bun.randomUUIDv7(),
          namespace: "bench",
          entity: entity ?? `user-${i % 1000}`,
          content: `memory ${i}: the user prefers green tea in the morning`,
          category: "general",
          importance: 0.5,
          tags: ["t"],
        },
      });
    await storage.apply(ops, null);
  }
  const seconds = (performance.now() - t0) / 1000;
  return { storage, seconds };
}

async function startServer(dataDir: string) {
  const port = 20000 + Math.floor(Math.random() * 10000);
  const proc = Bun.spawn(
    [process.execPath, "run", join(root, "src/main.ts"), "serve", "--port", String(port), "--data-dir", dataDir],
    { env: { ...process.env, MEMD_API_KEY: key, MEMD_LOG_LEVEL: "warn" }, stdout: "ignore", stderr: "inherit" },
  );
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 600; i++) {
    try {
      if ((await fetch(`${url}/readyz`)).status === 200) return { proc, url };
    } catch {}
    await Bun.sleep(50);
  }
  proc.kill();
  throw new Error("server did not start");
}

/** Every figure of the lifecycle section, as Markdown. */
export async function lifecycleBench(count = 1_000_000, log: (s: string) => void = console.error): Promise<string> {
  const work = mkdtempSync(join(tmpdir(), "memd-bench-lc-"));
  const out: string[] = [];
  try {
    const src = join(work, "src");
    log(`lifecycle: loading ${f0(count)} memories`);
    const loaded = await loadStore({ dataDir: src }, count);
    const stats = await loaded.storage.stats();
    await loaded.storage.close();
    const records = stats.memoryRecords + stats.events;

    // List paging at 1 connection: 1,000 pages of 100 through the namespace, then through one entity.
    log("lifecycle: list paging");
    const srv = await startServer(src);
    const paging: Record<string, number[]> = { namespace: [], entity: [] };
    try {
      for (const [scope, query] of [
        ["namespace", "namespace=bench"],
        ["entity", "namespace=bench&entity=user-7"],
      ] as const) {
        let cursor: string | null = null;
        for (let i = 0; i < 1000; i++) {
          const t0 = performance.now();
          const res = await fetch(`${srv.url}/v1/memory?${query}&limit=100${cursor ? `&cursor=${cursor}` : ""}`, {
            headers: { authorization: `Bearer ${key}` },
          });
          const body = (await res.json()) as { nextCursor: string | null };
          paging[scope].push(performance.now() - t0);
          cursor = body.nextCursor;
          if (!cursor) cursor = null;
        }
      }
    } finally {
      srv.proc.kill("SIGTERM");
      await srv.proc.exited;
    }

    log("lifecycle: export");
    const file = join(work, "export.jsonl");
    const exp = await measured(["export", "--data-dir", src, "--out", file]);
    log(`lifecycle: export ${exp.seconds.toFixed(1)} s, VmHWM ${f0(exp.hwmMiB)} MiB, anon ${f0(exp.anonMiB)} MiB`);
    const fileMiB = Bun.file(file).size / 1024 / 1024;
    log("lifecycle: import");
    const imp = await measured(["import", file, "--data-dir", join(work, "dst")]);
    log(`lifecycle: import ${imp.seconds.toFixed(1)} s, VmHWM ${f0(imp.hwmMiB)} MiB, anon ${f0(imp.anonMiB)} MiB`);

    log("lifecycle: erase of 10,000 memories");
    const erase = async (settings: { dataDir: string; databaseUrl?: string }) => {
      const { storage } = await loadStore(settings, 10_000, "erase-me");
      const t0 = performance.now();
      const e = await storage.erase("bench", "erase-me", null);
      const took = performance.now() - t0;
      await storage.close();
      return { took, e };
    };
    const lmdbErase = await erase({ dataDir: join(work, "erase") });
    const pgUrl = process.env.MEMD_BENCH_DATABASE_URL;
    const pgErase = pgUrl ? await erase({ dataDir: work, databaseUrl: pgUrl }) : undefined;

    out.push(
      "## Lifecycle: export, import, erase, list paging",
      "",
      `A store of ${f0(count)} memories (${f0(records)} records: memories and their ADD events), bulk-loaded through \`apply\` in ${loaded.seconds.toFixed(1)} s. Export and import run \`bun run src/main.ts export|import\` on LMDB; RSS sampled every 50 ms from /proc (VmHWM counts the pages of the memory-mapped store the process touched, which are page cache, not heap; the anonymous peak is the process's own memory).`,
      "",
      "| what | records | seconds | records/s | peak RSS (VmHWM) | peak anonymous RSS |",
      "| --- | --- | --- | --- | --- | --- |",
      `| memd export (${fileMiB.toFixed(0)} MiB of JSON Lines) | ${f0(records)} | ${exp.seconds.toFixed(1)} | ${f0(records / exp.seconds)} | ${f0(exp.hwmMiB)} MiB | ${f0(exp.anonMiB)} MiB |`,
      `| memd import into a new LMDB store (checks every line, then writes) | ${f0(records)} | ${imp.seconds.toFixed(1)} | ${f0(records / imp.seconds)} | ${f0(imp.hwmMiB)} MiB | ${f0(imp.anonMiB)} MiB |`,
      "",
      "| what | figure |",
      "| --- | --- |",
      `| erase an entity of 10,000 memories, LMDB (${f0(lmdbErase.e.events)} events scrubbed) | ${ms(lmdbErase.took)} |`,
      ...(pgErase ? [`| erase an entity of 10,000 memories, PostgreSQL | ${ms(pgErase.took)} |`] : []),
      `| list paging, 100 per page, 1 connection, namespace of ${f0(count)}: p50 / p99 (1,000 pages) | ${ms(percentile(paging.namespace, 50))} / ${ms(percentile(paging.namespace, 99))} |`,
      `| list paging, 100 per page, one entity (${f0(count / 1000)} memories, pages wrap around): p50 / p99 | ${ms(percentile(paging.entity, 50))} / ${ms(percentile(paging.entity, 99))} |`,
      "",
    );
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
  return out.join("\n");
}

if (import.meta.main) {
  const n = Number(process.env.BENCH_LIFECYCLE_MEMORIES ?? 1_000_000);
  console.log(await lifecycleBench(n));
}
