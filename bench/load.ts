// Bulk loader for the benchmarks: `bun run bench/load.ts <dataDir> <memories>`. Writes through
// the same service functions as a raw store (insertMemory: record, indexes, ADD event), 10,000
// per transaction instead of one per HTTP request, so 1,000,000 load in well under a minute.
// Adds two "hot" memories with 10 and 200 MERGE events, for events-by-memoryId answers.
import { CommitNotifier } from "../src/audit/notify";
import { appendEvent, EventClock, eventOf } from "../src/audit/service";
import { loadConfig } from "../src/config/config";
import type { Core } from "../src/core";
import { createLogger } from "../src/log";
import { insertMemory, newRecord } from "../src/memory/service";
import { openStore, Writes } from "../src/storage/store";

const [dataDir, countArg] = process.argv.slice(2);
const count = Number(countArg);
const store = openStore(dataDir);
const core: Core = {
  store,
  clock: new EventClock(store),
  notifier: new CommitNotifier(),
  config: loadConfig(["--data-dir", dataDir], {}),
  logger: createLogger("warn"),
};
const namespace = "bench";
const started = performance.now();
const batch = 10_000;

for (let done = 0; done < count; done += batch) {
  store.env.transactionSync(() => {
    const w = new Writes();
    for (let i = done; i < Math.min(count, done + batch); i++) {
      const req = {
        namespace,
        entity: `user-${i % 1000}`,
        content: `memory ${i}: the user prefers green tea in the morning`,
        infer: false,
      };
      const r = newRecord(req, { content: req.content });
      insertMemory(core, w, r, eventOf("ADD", r, null, { newContent: r.content }));
    }
    w.apply();
  });
}
const hot: Record<string, string> = {};
for (const n of [10, 200]) {
  store.env.transactionSync(() => {
    const w = new Writes();
    const req = { namespace, entity: "hot", content: `hot memory with ${n} events`, infer: false };
    const r = newRecord(req, { content: req.content });
    insertMemory(core, w, r, eventOf("ADD", r, null, { newContent: r.content }));
    for (let i = 1; i < n; i++)
      appendEvent(store, core.clock, w, eventOf("MERGE", r, null, { oldContent: r.content, newContent: r.content }));
    w.apply();
    hot[n] = r.id;
  });
}
// A `since` in the middle of the history, so diff scans start mid-range, not at an edge.
const keys = store.dbs.eventsByNs.getKeys({
  start: [namespace],
  end: [namespace, "\uffff"],
  offset: Math.floor(count / 2),
  limit: 1,
}).asArray;
const midMs = (keys as unknown as [string, number, number][])[0][1];
await store.flushed();
await store.close();
console.log(
  JSON.stringify({
    memories: count,
    seconds: (performance.now() - started) / 1000,
    hot,
    since: new Date(midMs).toISOString(),
  }),
);
