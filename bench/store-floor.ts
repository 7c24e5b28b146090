// The floors under the raw store, for bench/store-path.ts to set beside the ceiling and memd. Take
// memd's arguments (`serve --port N --data-dir DIR`).
// - default: a bare Bun.serve that parses the JSON body, applies one ADD through the LMDB storage
//   and answers the new id. No authentication, validation, log or metrics: what HTTP plus the
//   store's LMDB half cost.
// - `--entries N`: the same server writing N LMDB entries per request and nothing else (the body
//   as a record keyed by a counter, then N - 1 null index entries keyed [namespace, id, seq], one
//   sub-database each, as memd's indexes are), group-committed as memd commits (requests arriving
//   together share one write transaction) and answered once flushed. What a durable write through
//   lmdb-js costs by the number of entries it writes; memd's raw store writes 7.
import { parseArgs } from "node:util";
import { open } from "lmdb";
import { openLmdb } from "../src/storage/lmdb/index";

const { values } = parseArgs({
  args: process.argv.slice(2),
  options: { port: { type: "string" }, "data-dir": { type: "string" }, entries: { type: "string" } },
  strict: false,
});
const dataDir = String(values["data-dir"]);

type Store = (b: { namespace: string; entity: string; content: string }) => Promise<string>;

async function memdStorage(): Promise<Store> {
  const storage = await openLmdb(dataDir);
  return async (b) => {
    const [added] = await storage.apply(
      [
        {
          event: "ADD",
          create: {
            id: Bun.randomUUIDv7(),
            namespace: b.namespace,
            entity: b.entity,
            content: b.content,
            category: "general",
            importance: 0.5,
          },
        },
      ],
      null,
    );
    return added!.memory.id;
  };
}

function entries(n: number): Store {
  const env = open({ path: dataDir, mapSize: 4 * 1024 ** 3, maxDbs: 16, overlappingSync: true });
  const records = env.openDB("records", { sharedStructuresKey: Symbol.for("structures") });
  const indexes = Array.from({ length: n - 1 }, (_, i) => env.openDB(`index${i}`, {}));
  let seq = 0;
  let pending: { value: { id: string; namespace: string }; resolve(): void }[] | undefined;
  const run = (batch: NonNullable<typeof pending>) =>
    env
      .transaction(() => {
        if (pending === batch) pending = undefined;
        for (const { value } of batch) {
          records.putSync(++seq, value);
          for (const db of indexes) db.putSync([value.namespace, value.id, seq], null);
        }
      })
      .then(() => env.flushed)
      .then(() => {
        for (const item of batch) item.resolve();
      });
  return async (b) => {
    const id = Bun.randomUUIDv7();
    await new Promise<void>((resolve) => {
      const item = { value: { id, ...b }, resolve };
      if (pending) pending.push(item);
      else {
        pending = [item];
        run(pending);
      }
    });
    return id;
  };
}

const store = values.entries ? entries(Number(values.entries)) : await memdStorage();
Bun.serve({
  port: Number(values.port),
  hostname: "127.0.0.1",
  async fetch(req) {
    if (req.method !== "POST") return Response.json({ ok: true }); // store-path polls /readyz
    const b = (await req.json()) as { namespace: string; entity: string; content: string };
    return Response.json({ id: await store(b) });
  },
});
