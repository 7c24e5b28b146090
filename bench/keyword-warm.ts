// Warm keyword search in process (issue 26): opens a data dir, makes the lists of namespace "big"
// (from its snapshot if there is one), then times BENCH_WARM_N queries of 3 words drawn as
// bench/scale.ts draws them, whole namespace, limit 10: p50 / p99 / mean, and a tally by where
// the time goes when BENCH_WARM_PROFILE is set. `bun run bench/keyword-warm.ts <dir>`; run it
// from two checkouts on two copies of one data dir for a same-run A/B.
import { openLmdb } from "../src/storage/lmdb/index";
import { queryTerms } from "../src/text/tokens";
import { seededRandom } from "../test/helpers";

const dir = process.argv[2];
const N = Number(process.env.BENCH_WARM_N ?? 2000);
const words = Array.from({ length: 20000 }, (_, i) => `w${i.toString(36)}`);
const rand = seededRandom(7);
const zipf = () => words[Math.min(words.length - 1, Math.floor(Math.exp(rand() * Math.log(words.length)) - 1))];
const s = await openLmdb(dir);
let t = performance.now();
await s.keywordSearch({ namespace: "big" }, queryTerms("w0 w1 w2"), {}, 10);
const first = performance.now() - t;
const lat: number[] = [];
for (let i = 0; i < N + 200; i++) {
  const q = queryTerms(`${zipf()} ${zipf()} ${zipf()}`);
  t = performance.now();
  await s.keywordSearch({ namespace: "big" }, q, {}, 10);
  if (i >= 200) lat.push(performance.now() - t);
}
lat.sort((a, b) => a - b);
const at = (p: number) => lat[Math.min(lat.length - 1, Math.floor(p * lat.length))].toFixed(3);
console.log(
  `first ${first.toFixed(0)} ms; warm p50 ${at(0.5)} ms, p90 ${at(0.9)}, p99 ${at(0.99)}, mean ${(lat.reduce((a, b) => a + b, 0) / lat.length).toFixed(3)} ms (${N} queries)`,
);
await s.close();
