import { type Applied, type MemoryOp, type Storage, StorageError } from "./storage";

interface Item {
  ops: readonly MemoryOp[];
  actorKeyId: string | null;
  resolve(applied: (Applied | null)[]): void;
  reject(e: unknown): void;
}

/**
 * Group commit for a backend whose `apply` is one database transaction (PostgreSQL): while a
 * batch of applies runs, the applies that arrive wait, and then run together, one transaction
 * per actor key with their ops in arrival order, so N concurrent stores cost one transaction,
 * one clock-row lock and one commit (fsync) instead of N, one after another. Each caller gets
 * the results of its own ops. If a merged transaction fails for a reason other than the
 * database being unavailable or full, its applies are run again one by one, so only the apply
 * at fault fails and every other one behaves as if alone. An apply with an explicit `now` (the
 * TTL sweeper, tests) runs alone at once.
 */
export function batchApplies(applyAlone: Storage["apply"]): Storage["apply"] {
  let queue: Item[] = [];
  let running = false;

  async function runGroup(actorKeyId: string | null, items: Item[]) {
    if (items.length === 1) {
      const [it] = items;
      await applyAlone(it.ops, actorKeyId).then(it.resolve, it.reject);
      return;
    }
    try {
      const all = await applyAlone(
        items.flatMap((it) => it.ops),
        actorKeyId,
      );
      let at = 0;
      for (const it of items) {
        it.resolve(all.slice(at, at + it.ops.length));
        at += it.ops.length;
      }
    } catch (e) {
      if (e instanceof StorageError) for (const it of items) it.reject(e);
      else await Promise.all(items.map((it) => applyAlone(it.ops, actorKeyId).then(it.resolve, it.reject)));
    }
  }

  async function drain() {
    running = true;
    while (queue.length > 0) {
      const batch = queue;
      queue = [];
      const byActor = new Map<string | null, Item[]>();
      for (const it of batch) {
        const list = byActor.get(it.actorKeyId);
        if (list) list.push(it);
        else byActor.set(it.actorKeyId, [it]);
      }
      await Promise.all([...byActor].map(([actor, items]) => runGroup(actor, items)));
    }
    running = false;
  }

  return (ops, actorKeyId, now) => {
    if (now !== undefined || ops.length === 0) return applyAlone(ops, actorKeyId, now);
    return new Promise((resolve, reject) => {
      queue.push({ ops, actorKeyId, resolve, reject });
      if (!running) void drain();
    });
  };
}
