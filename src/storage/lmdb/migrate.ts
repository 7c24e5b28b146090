import type { RootDatabase } from "lmdb";
import type { MemoryRecord } from "../records";
import { IndexWriter } from "./index-writer";
import { type Dbs, FORMAT_VERSION, keys } from "./layout";
import { Writes } from "./staging";

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
      step(dbs, env);
      dbs.meta.putSync("format", version + 1);
    });
  }
  if (dbs.meta.get("format") === undefined) await env.transaction(() => dbs.meta.putSync("format", FORMAT_VERSION));
  await env.flushed;
}

/** steps[v] turns format v into v + 1. */
const steps: Record<number, (dbs: Dbs, env: RootDatabase) => void> = {
  // 2: an index of current memories per namespace, for newest-first reads across entities.
  1(dbs) {
    for (const key of dbs.entityMemories.getKeys({})) {
      const [ns, , id] = key as [string, string, string];
      dbs.namespaceMemories.putSync(keys.namespaceMemory(ns, id), null);
    }
  },
  // 4: erasures, idempotency and idempotency_expiries start empty; opening them creates them.
  3() {},
  // 5: each memory's terms in its namespace_memories value; doc_terms and search_stats dropped.
  4(dbs, env) {
    for (const name of ["doc_terms", "search_stats"]) env.openDB(name, {}).dropSync();
    rebuildIndex(dbs, false);
  },
  // 6: records written from now on name their fields in the shared structures (see openEnv;
  // records written before keep their own names and read as they are); namespace_memories'
  // values hold no terms (the in-memory lists tokenize the records).
  5(dbs) {
    rebuildIndex(dbs, false);
  },
  // 7: memories carry observedAt and events the memory's whole state (storage/asof.ts). Nothing
  // to rewrite: older records and events read as they are (observedAt is then createdAt; an
  // older event's other fields come from the record). The step keeps older releases, which
  // would drop the new fields on their next write, from opening the data dir.
  6() {},
  // 8: keyed facts: memories may carry a key, and memory_keys (empty: no memory had one) names
  // each key's current holder. Older releases would write around the index: kept out.
  7() {},
};

/** 3: the search index, built from the current memories (no vectors: `memd reindex` embeds). */
steps[2] = (dbs) => {
  rebuildIndex(dbs, false);
};

/**
 * Clears the keyword index and builds it again from every current memory, inside the caller's
 * write transaction; with `embeddings`, also drops every vector and queues every current memory
 * for embedding. Returns the number of memories indexed.
 */
export function rebuildIndex(dbs: Dbs, embeddings: boolean): number {
  dbs.namespaceMemories.clearSync();
  if (embeddings) for (const db of [dbs.vectors, dbs.embedPending]) db.clearSync();
  // Staged writes applied in batches keep memory flat on large stores.
  const batch = 2000;
  let n = 0;
  let pending: MemoryRecord[] = [];
  const flush = () => {
    const w = new Writes();
    const ix = new IndexWriter(dbs, w);
    for (const r of pending) {
      ix.add(r);
      if (embeddings) ix.setVector(r, "pending");
    }
    w.apply();
    pending = [];
  };
  for (const key of dbs.entityMemories.getKeys({})) {
    const r = dbs.memories.get((key as string[]).at(-1)!) as MemoryRecord | undefined;
    if (r?.state !== "current") continue;
    pending.push(r);
    n++;
    if (pending.length >= batch) flush();
  }
  flush();
  return n;
}
