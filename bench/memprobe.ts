// Where a namespace's keyword lists' memory goes (issue 26): opens a data dir in this process,
// makes the lists of one namespace (from its snapshot if there is one) and prints RssAnon, the
// JS heap and smaps_rollup at each step. `bun run bench/memprobe.ts <dir> [namespace]`.
import { heapStats } from "bun:jsc";
import { openLmdb } from "../src/storage/lmdb/index";
import { queryTerms } from "../src/text/tokens";

const [dir, ns = "big"] = process.argv.slice(2);
const kb = (re: RegExp, text: string) => Number(re.exec(text)?.[1] ?? 0) / 1024;
async function report(step: string) {
  const status = await Bun.file("/proc/self/status").text();
  const roll = await Bun.file("/proc/self/smaps_rollup").text();
  const h = heapStats();
  const m = process.memoryUsage();
  console.log(
    `${step.padEnd(28)} RssAnon ${kb(/^RssAnon:\s+(\d+)/m, status).toFixed(0)} MiB, RssFile ${kb(/^RssFile:\s+(\d+)/m, status).toFixed(0)}, heap ${(h.heapSize / 2 ** 20).toFixed(0)} / cap ${(h.heapCapacity / 2 ** 20).toFixed(0)} MiB, extra ${(h.extraMemorySize / 2 ** 20).toFixed(0)}, arrayBuffers ${(m.arrayBuffers / 2 ** 20).toFixed(0)}, Private_Dirty ${kb(/^Private_Dirty:\s+(\d+)/m, roll).toFixed(0)}`,
  );
}
await report("start");
const s = await openLmdb(dir);
await report("opened");
let t = performance.now();
await s.keywordSearch({ namespace: ns }, queryTerms("w0 w1 w2"), {}, 10);
console.log(`first search ${(performance.now() - t).toFixed(0)} ms`);
await report("first search");
Bun.gc(true);
await Bun.sleep(100);
await report("gc");
t = performance.now();
for (let i = 0; i < 200; i++)
  await s.keywordSearch({ namespace: ns }, queryTerms(`w${i.toString(36)} w${(i * 7).toString(36)} w3`), {}, 10);
console.log(`200 searches ${(performance.now() - t).toFixed(0)} ms`);
Bun.gc(true);
await Bun.sleep(2000);
await report("after searches + gc + 2s");
await s.close();
