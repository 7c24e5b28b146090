import type { RootDatabase } from "lmdb";
import type { Dbs } from "./index";
import { FORMAT_VERSION, keys } from "./layout";

/**
 * Brings a data dir up to FORMAT_VERSION, in one write transaction per step, and records the
 * version. Format 1 (the first release) has no version record. A newer format is refused.
 */
export async function migrate(env: RootDatabase, dbs: Dbs, dataDir: string): Promise<void> {
  const empty =
    [...dbs.memories.getKeys({ limit: 1 })].length === 0 && [...dbs.apiKeys.getKeys({ limit: 1 })].length === 0;
  let version = (dbs.meta.get("format") as number | undefined) ?? (empty ? FORMAT_VERSION : 1);
  if (version > FORMAT_VERSION)
    throw new Error(
      `the data dir ${dataDir} was written by a newer memd (format ${version}; this release reads up to ${FORMAT_VERSION}); upgrade memd`,
    );
  for (; version < FORMAT_VERSION; version++) {
    const step = steps[version];
    await env.transaction(() => {
      step(dbs);
      dbs.meta.putSync("format", version + 1);
    });
  }
  if (dbs.meta.get("format") === undefined) await env.transaction(() => dbs.meta.putSync("format", FORMAT_VERSION));
  await env.flushed;
}

/** steps[v] turns format v into v + 1. */
const steps: Record<number, (dbs: Dbs) => void> = {
  // 2: an index of current memories per namespace, for newest-first reads across entities.
  1(dbs) {
    for (const key of dbs.entityMemories.getKeys({})) {
      const [ns, , id] = key as [string, string, string];
      dbs.namespaceMemories.putSync(keys.namespaceMemory(ns, id), null);
    }
  },
  // 3: the search index's step (merged separately); here a step that writes nothing.
  2() {},
  // 4: erasures, idempotency and idempotency_expiries start empty; opening them creates them.
  3() {},
};
