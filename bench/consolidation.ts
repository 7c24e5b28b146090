// Consolidation without a model (issue 33): precision and recall of the merge rule
// (src/consolidate/same-fact.ts) on bench/consolidation-set.json, memd's own labelled pairs: true
// duplicates in many surface forms, and near-misses that differ in a number, a date, a negation
// or a name. The bar: no false merge. Prints a section of bench/results.md; exits 1 on a false
// merge. `bun run bench/consolidation.ts`.
import { join } from "node:path";
import { factKey, sameFact } from "../src/consolidate/same-fact";

type Pair = { a: string; b: string; same: boolean; kind: string };
const { pairs } = (await Bun.file(join(import.meta.dir, "consolidation-set.json")).json()) as { pairs: Pair[] };

let tp = 0;
let fp = 0;
let fn = 0;
const falseMerges: Pair[] = [];
const missedByKind = new Map<string, number>();
const started = performance.now();
for (const p of pairs) {
  const merged = sameFact(factKey(p.a), factKey(p.b));
  if (merged && p.same) tp++;
  else if (merged) {
    fp++;
    falseMerges.push(p);
  } else if (p.same) {
    fn++;
    missedByKind.set(p.kind, (missedByKind.get(p.kind) ?? 0) + 1);
  }
}
const ms = performance.now() - started;
const positives = pairs.filter((p) => p.same).length;
const precision = tp + fp === 0 ? 1 : tp / (tp + fp);
const recall = positives === 0 ? 1 : tp / positives;
const kinds = [...new Set(pairs.filter((p) => !p.same).map((p) => p.kind))].sort();
const out = [
  "",
  "## Consolidation without a model (bench/consolidation.ts)",
  "",
  `${pairs.length} labelled pairs (bench/consolidation-set.json): ${positives} the same fact in another surface form, ${pairs.length - positives} near-misses (${kinds
    .map((k) => `${pairs.filter((p) => !p.same && p.kind === k).length} ${k}`)
    .join(", ")}).`,
  "",
  "| Merges | Precision | Recall | False merges | Missed duplicates | Time per pair |",
  "|---|---|---|---|---|---|",
  `| ${tp + fp} | ${precision.toFixed(3)} | ${recall.toFixed(3)} | ${fp} (bar: 0) | ${fn} | ${((ms * 1000) / pairs.length).toFixed(1)} µs |`,
  "",
  ...falseMerges.map((p) => `- false merge (${p.kind}): "${p.a}" / "${p.b}"`),
];
console.log(out.join("\n"));
if (fp > 0) process.exit(1);
