import { existsSync, mkdirSync } from "node:fs";
import { openEnv } from "./env";

/**
 * Copies the LMDB store in `dataDir` to the new directory `dest` while a server may be running:
 * LMDB's copy runs in one read transaction, so the copy is a consistent snapshot and writers
 * are not blocked.
 */
export async function backupStore(dataDir: string, dest: string): Promise<void> {
  if (!existsSync(`${dataDir}/data.mdb`)) throw new Error(`no store in ${dataDir}`);
  if (existsSync(dest)) throw new Error(`${dest} already exists; give a new path`);
  const { env } = openEnv(dataDir);
  try {
    // LMDB writes data.mdb into an existing directory.
    mkdirSync(dest, { recursive: true });
    await env.backup(dest, false);
  } finally {
    await env.close();
  }
}
