import { existsSync, mkdirSync, readdirSync, readFileSync, realpathSync, renameSync, rmSync } from "node:fs";
import { join } from "node:path";
import { openEnv } from "./env";
import { dropSnapshots } from "./keyword-snapshot";

/** Processes other than this one that have `file` mapped (Linux /proc); empty elsewhere. */
export function processesMapping(file: string): number[] {
  if (!existsSync("/proc/self/maps")) return [];
  const real = realpathSync(file);
  const pids: number[] = [];
  for (const entry of readdirSync("/proc")) {
    const pid = Number(entry);
    if (!Number.isInteger(pid) || pid === process.pid) continue;
    try {
      if (readFileSync(`/proc/${pid}/maps`, "utf8").includes(real)) pids.push(pid);
    } catch {
      // gone, or not ours to read
    }
  }
  return pids;
}

/**
 * Rewrites the LMDB store of a stopped server without free pages: LMDB's compacting copy to a
 * new file in the data dir, then a rename over data.mdb. Pages freed by deletes and erasures,
 * which may still hold the bytes they held, are not copied. Refused while another process has
 * the store open (a running server): swapping the file under it would lose its writes.
 * Returns the sizes before and after, in bytes.
 */
export async function compactStore(dataDir: string): Promise<{ before: number; after: number }> {
  const file = join(dataDir, "data.mdb");
  if (!existsSync(file)) throw new Error(`no store in ${dataDir}`);
  const users = processesMapping(file);
  if (users.length)
    throw new Error(`the store is open in process ${users.join(", ")} (a running server?); stop it first`);
  const tmp = join(dataDir, "compact.tmp");
  rmSync(tmp, { recursive: true, force: true });
  const before = Bun.file(file).size;
  const { env } = openEnv(dataDir);
  try {
    mkdirSync(tmp);
    await env.backup(tmp, true);
  } finally {
    await env.close();
  }
  renameSync(join(tmp, "data.mdb"), file);
  rmSync(tmp, { recursive: true, force: true });
  // Keyword snapshots may hold the words of memories erased since they were taken.
  dropSnapshots(dataDir);
  return { before, after: Bun.file(file).size };
}
