// Memories adjacent in time. In a conversation (or any run of notes) the answer to a question is
// often in the memory stored just after the one that shares the question's words, or just before
// it: "What did Caroline research?" matches Melanie's question, and Caroline's reply holds the
// answer. So a hit's score is raised by a share of its neighbours' scores (the memories stored
// just before and after it in its entity, when they are hits too): a run of matching memories
// rises together, and a lone match of a common word does not. Only hits are reordered, never a
// memory added that shares no word with the query.
import { byScoreThenNewer } from "../storage/ops";
import type { MemoryReads, Scored } from "../storage/storage";

/** The share of each adjacent hit's score a hit gains (bench/notes.md, "Adjacent memories"). */
export const NEIGHBOUR_SHARE = Number(process.env.X_NS ?? 0.3);
/** Keyword hits read and reordered (more when the request's limit is larger). */
export const NEIGHBOUR_DEPTH = Number(process.env.X_ND ?? 30);

/** `hits` reordered by their scores plus NEIGHBOUR_SHARE times their adjacent hits' scores. */
export async function withNeighbours(
  storage: Pick<MemoryReads, "adjacentMemories">,
  hits: readonly Scored[],
  now: number,
): Promise<Scored[]> {
  if (hits.length < 2) return [...hits];
  const own = new Map<string, number>();
  for (const h of hits) own.set(h.memory.id, h.score);
  const gain = new Map<string, number>();
  const seen = new Set<string>();
  for (const [of, n] of await storage.adjacentMemories(
    hits.map((h) => h.memory),
    now,
  )) {
    const s = own.get(n.id);
    if (s === undefined) continue;
    // A pair of adjacent hits is met from both sides: counted once each way.
    const pair = `${of} ${n.id}`;
    if (seen.has(pair)) continue;
    seen.add(pair);
    gain.set(of, (gain.get(of) ?? 0) + NEIGHBOUR_SHARE * s);
  }
  return hits
    .map((h) => ({ memory: h.memory, score: h.score + (gain.get(h.memory.id) ?? 0) }))
    .sort(byScoreThenNewer);
}
