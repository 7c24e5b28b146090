// What the keyword snapshot tests compare: a namespace's keyword answers, from whatever lists the
// store holds (built, read from a snapshot, caught up) against lists rebuilt from the records.
import { openLmdb } from "../../src/storage/lmdb/index";
import { dropSnapshots } from "../../src/storage/lmdb/keyword-snapshot";
import { queryTerms } from "../../src/text/tokens";

export const vocab =
  "tea coffee cafe dog cat lisbon paris nurse piano runs daily vegan meat sails boat red blue green".split(" ");
export const queries = ["tea", "dog cat", "paris piano", "red blue green", "vegan meat daily", "boat"];

/** Every query's answer (ids and scores, rounded) over the namespace and one entity. */
export async function keywordAnswers(s: Awaited<ReturnType<typeof openLmdb>>, ns: string) {
  const out: string[] = [];
  for (const q of queries)
    for (const entity of [undefined, "e1"]) {
      const hits = await s.keywordSearch({ namespace: ns, entity }, queryTerms(q), {}, 20);
      out.push(hits.map((h) => `${h.memory.id}:${h.score.toFixed(9)}`).join(" "));
    }
  return out;
}

/** The answers of lists rebuilt from the records (snapshots dropped, no background builds). */
export async function rebuiltAnswers(dir: string, ns: string) {
  dropSnapshots(dir);
  const s = await openLmdb(dir);
  try {
    return await keywordAnswers(s, ns);
  } finally {
    await s.close();
  }
}
