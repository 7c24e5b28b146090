// POST /v1/memory/context: the memories an agent puts in its prompt before it answers, as one
// text block within a token budget.

import { readAsOf } from "../audit/service";
import type { Core } from "../core";
import type { EmbedCost } from "../embedding/client";
import { toMemory } from "../memory/service";
import { keywordAsOf } from "../search/asof";
import { RERANK_DEPTH, type RerankCost, rerank } from "../search/rerank";
import { maxQueryChars, rank, resolveMode } from "../search/service";
import { matchesFilter } from "../storage/ops";
import { isCurrent, type MemoryRecord, observedOf } from "../storage/records";
import type { Scored, SearchFilter } from "../storage/storage";
import type { QueryTerm } from "../text/scoring";
import { countTokens, tokenizerName } from "../text/token-count";
import { queryTerms } from "../text/tokens";
import { invalidField } from "../wire/errors";
import { instantField } from "../wire/time";
import { excerpt, oneLine } from "./excerpt";
import { type ContextRequest, type ContextResponse, contextTokens } from "./model";
import { favourNamedSpeakers } from "./speakers";

/** With a query: the search's best this many hits are the candidates. */
export const CONTEXT_SEARCH_HITS = 100;
/** Without a query (or when it finds nothing): the entity's newest this many memories are ranked. */
export const CONTEXT_SCAN = 2000;
/** Recency halves every this many days in the score without a query. */
export const RECENCY_HALF_LIFE_DAYS = 30;
/** Without a query a memory scores IMPORTANCE_WEIGHT × importance + (1 − it) × recency (0 to 1). */
export const IMPORTANCE_WEIGHT = 0.5;
/** The memories adjacent in time to this many of the best hits are placed right after them. */
export const CONTEXT_ADJACENT_OF = 5;
/**
 * In hybrid mode keyword's first hits keep their places in the block's candidates, one for every
 * this many tokens of the budget (20 at 1,000: about the conversation turns a block of that size
 * holds): the semantic list reorders and adds after them, so a hybrid block holds what a keyword
 * block holds. Reordered by the built-in embedder's list, keyword's first twenty lost evidence a
 * keyword block held; with the named speakers' memories scored up, the endpoints' fusion gated them
 * ahead of the best hits (LoCoMo dev half, bench/notes.md, issue 36).
 */
export const TOKENS_PER_KEPT_HIT = 50;
/** A memory too long for what is left gets an excerpt when at least this many tokens are left. */
export const EXCERPT_MIN_TOKENS = 16;
/** Once this many candidates in a row did not fit, the rest are not tried (each costs a count). */
const MISSES_BEFORE_STOP = 50;

const day = 86_400_000;

/** The entity's newest current memories (at most CONTEXT_SCAN) that pass the filter. */
async function newestMemories(core: Core, req: ContextRequest, filter: SearchFilter): Promise<MemoryRecord[]> {
  const wanted = req.categories && new Set(req.categories);
  const records: MemoryRecord[] = [];
  let before: string | undefined;
  while (records.length < CONTEXT_SCAN) {
    const page = await core.storage.listMemories({
      namespace: req.namespace,
      entity: req.entity,
      category: req.categories?.length === 1 ? req.categories[0] : undefined,
      observedAfter: filter.observedAfter,
      observedBefore: filter.observedBefore,
      limit: Math.min(1000, CONTEXT_SCAN - records.length),
      ...(before !== undefined ? { before } : {}),
    });
    for (const m of page.memories) if (!wanted || wanted.has(m.category)) records.push(m);
    if (page.next === undefined) break;
    before = page.next;
  }
  return records;
}

/**
 * Memories ranked by importance and recency, best first. Recency counts from when each fact was
 * observed (its observedAt: a backfilled conversation of last year is not recent) to `now`.
 */
function importantAndRecent(records: readonly MemoryRecord[], now: number): Scored[] {
  const score = (m: MemoryRecord) =>
    IMPORTANCE_WEIGHT * m.importance +
    (1 - IMPORTANCE_WEIGHT) * 0.5 ** (Math.max(0, now - observedOf(m)) / (RECENCY_HALF_LIFE_DAYS * day));
  return records
    .map((memory) => ({ memory, score: score(memory) }))
    .sort(
      (a, b) => b.score - a.score || b.memory.createdAt - a.memory.createdAt || (a.memory.id < b.memory.id ? 1 : -1),
    );
}

/**
 * The candidates with the memories adjacent in time to the best few (adjacent.ts) placed right
 * after each: the turn before and after a strong hit often holds what it is about, when it shares
 * a word with that hit or with the question.
 */
async function withAdjacent(
  candidates: Scored[],
  filter: SearchFilter,
  query: string,
  /** For each memory, the ones just before and after it in its entity: [its id, neighbour] pairs. */
  adjacent: (memories: MemoryRecord[]) => Promise<[string, MemoryRecord][]> | [string, MemoryRecord][],
): Promise<Scored[]> {
  const strong = candidates.slice(0, CONTEXT_ADJACENT_OF);
  if (strong.length === 0) return candidates;
  const pairs = await adjacent(strong.map((c) => c.memory));
  // A neighbour comes along only when it shares a word (not a stop word) with its hit or with the
  // question: the turn that continues a topic, not an unrelated fact stored next to it.
  const words = (text: string) => new Set(queryTerms(text).flatMap((t) => (t.weight === 1 ? [t.term] : [])));
  const asked = words(query);
  const hitWords = new Map(strong.map((c) => [c.memory.id, words(c.memory.content)]));
  const related = (of: string, m: MemoryRecord) =>
    [...words(m.content)].some((w) => asked.has(w) || hitWords.get(of)?.has(w));
  const near = new Map<string, MemoryRecord[]>();
  for (const [of, m] of pairs)
    if (matchesFilter(m, filter) && related(of, m)) {
      const l = near.get(of);
      if (l) l.push(m);
      else near.set(of, [m]);
    }
  const out: Scored[] = [];
  const placed = new Set<string>();
  const put = (c: Scored) => {
    if (placed.has(c.memory.id)) return;
    placed.add(c.memory.id);
    out.push(c);
  };
  for (const c of candidates) {
    put(c);
    // Shown with the score of the hit they sit next to (or their own, when higher).
    for (const m of near.get(c.memory.id) ?? [])
      put({ memory: m, score: Math.max(c.score, candidates.find((x) => x.memory.id === m.id)?.score ?? 0) });
  }
  return out;
}

/**
 * For each of `memories`, the versions just before and after it in id order among `versions` (an
 * entity's memories as of a moment, all current then): adjacentMemories' answer as of then.
 */
function adjacentAsOf(versions: readonly MemoryRecord[], memories: readonly MemoryRecord[]): [string, MemoryRecord][] {
  const byId = [...versions].sort((a, b) => (a.id < b.id ? -1 : 1));
  const at = new Map(byId.map((m, i) => [m.id, i]));
  const out: [string, MemoryRecord][] = [];
  for (const m of memories) {
    const i = at.get(m.id);
    if (i === undefined) continue;
    if (i > 0) out.push([m.id, byId[i - 1]]);
    if (i + 1 < byId.length) out.push([m.id, byId[i + 1]]);
  }
  return out;
}

/** A memory chosen for the block, and its text there when that is an excerpt (excerpt.ts). */
type Chosen = Scored & { text?: string };

/** The text of the chosen memories: groups by category in the order of their best member. */
export function renderContext(chosen: readonly Chosen[]): string {
  const groups = new Map<string, Chosen[]>();
  for (const c of chosen) {
    const g = groups.get(c.memory.category);
    if (g) g.push(c);
    else groups.set(c.memory.category, [c]);
  }
  const parts: string[] = [];
  for (const [category, cs] of groups)
    parts.push(`## ${category}\n${cs.map((c) => line(c.memory, c.text)).join("\n")}`);
  return parts.join("\n\n");
}

/** One memory's line prefix: the date the fact was observed (UTC). */
const dated = (m: MemoryRecord) => `- [${new Date(observedOf(m)).toISOString().slice(0, 10)}] `;
/** One memory's line: its date and its content (or the excerpt of it) on one line. */
const line = (m: MemoryRecord, text?: string) => dated(m) + (text ?? oneLine(m.content));

/**
 * The best candidates that fit in `maxTokens`, in candidate order. Each is tried in turn with
 * its line's cost (and its group heading's, for a new category); one that does not fit in what
 * is left gets an excerpt instead (the part that holds the query's words, at most a quarter of
 * the budget: excerpt.ts) when at least EXCERPT_MIN_TOKENS are left. The whole text is then
 * counted and the last chosen dropped until it fits, so the answer is never over the budget.
 */
export function fitToBudget(candidates: readonly Scored[], maxTokens: number, terms: readonly QueryTerm[] = []) {
  const chosen: Chosen[] = [];
  const groups = new Set<string>();
  let used = 0;
  let misses = 0;
  let truncated = false;
  for (const c of candidates) {
    if (maxTokens - used < 4 || misses >= MISSES_BEFORE_STOP) {
      truncated = true;
      break;
    }
    const heading = groups.has(c.memory.category) ? 0 : countTokens(`\n\n## ${c.memory.category}`);
    let cost = heading + countTokens(`\n${line(c.memory)}`);
    let text: string | undefined;
    if (used + cost > maxTokens) {
      truncated = true;
      const room = Math.min(maxTokens - used - heading, Math.floor(maxTokens / 4));
      text = room >= EXCERPT_MIN_TOKENS ? excerpt(c.memory.content, terms, `\n${dated(c.memory)}`, room) : undefined;
      if (text === undefined) {
        misses++;
        continue;
      }
      cost = heading + countTokens(`\n${line(c.memory, text)}`);
    }
    misses = 0;
    used += cost;
    groups.add(c.memory.category);
    chosen.push(text === undefined ? c : { ...c, text });
  }
  // Ordered as they appear: grouped, best group first.
  const order = (list: Chosen[]) => {
    const byCategory = new Map<string, Chosen[]>();
    for (const c of list) {
      const g = byCategory.get(c.memory.category);
      if (g) g.push(c);
      else byCategory.set(c.memory.category, [c]);
    }
    return [...byCategory.values()].flat();
  };
  for (;;) {
    const shown = order(chosen);
    const context = renderContext(shown);
    const tokens = countTokens(context);
    if (tokens <= maxTokens) return { shown, context, tokens, truncated };
    chosen.pop();
    truncated = true;
  }
}

export async function buildContext(
  core: Core,
  req: ContextRequest,
  cost: EmbedCost,
  rerankCost?: RerankCost,
): Promise<ContextResponse> {
  if (req.query !== undefined && req.query.length > maxQueryChars && [...req.query].length > maxQueryChars)
    throw invalidField("query", `must be a string of 1 to ${maxQueryChars} characters, not blank`);
  const maxTokens = req.maxTokens ?? contextTokens.default;
  const filter: SearchFilter = {
    ...(req.categories ? { categories: req.categories } : {}),
    observedAfter: instantField("observedAfter", req.observedAfter),
    observedBefore: instantField("observedBefore", req.observedBefore),
  };
  const asOf = await readAsOf(core.storage, req.namespace, req.asOf);
  let candidates: Scored[] = [];
  let mode: ContextResponse["mode"] = "importance";
  if (asOf !== undefined) {
    // As of a moment: the entity's memories then (docs/time.md); a query is matched by keywords,
    // since older versions have no embeddings.
    const { memories: versions } = await core.storage.entityAsOf({
      namespace: req.namespace,
      entity: req.entity,
      asOf,
    });
    if (req.query !== undefined) {
      const hits = favourNamedSpeakers(
        keywordAsOf(versions, queryTerms(req.query), filter, CONTEXT_SEARCH_HITS),
        req.query,
        CONTEXT_ADJACENT_OF,
      );
      // The memories adjacent in time to the best hits, as they were then.
      candidates = await withAdjacent(hits, filter, req.query, (strong) => adjacentAsOf(versions, strong));
      mode = "keyword";
    }
    if (candidates.length === 0) {
      candidates = importantAndRecent(
        versions.filter((m) => matchesFilter(m, filter)),
        asOf,
      );
      mode = "importance";
    }
  } else {
    const now = Date.now();
    const query = req.query;
    if (query !== undefined) {
      const found = await rank(core, {
        scope: { namespace: req.namespace, entity: req.entity },
        query,
        mode: resolveMode(core, undefined),
        limit: CONTEXT_SEARCH_HITS,
        filter,
        cost,
        // A memory that only happens to be in the entity is no context for the question.
        relevantOnly: true,
        // After the best few, the memories of a person the question names come first (speakers.ts).
        reorderKeyword: (hits) => favourNamedSpeakers(hits, query, CONTEXT_ADJACENT_OF),
        // A hybrid block holds what a keyword block holds, and adds.
        keywordKept: Math.ceil(maxTokens / TOKENS_PER_KEPT_HIT),
      });
      // With a reranker, the best RERANK_DEPTH are reordered by it (search/rerank.ts).
      const hits = await rerank(
        core,
        query,
        found.hits.filter((h) => isCurrent(h.memory, now)),
        RERANK_DEPTH,
        rerankCost,
      );
      candidates = await withAdjacent(hits, filter, query, (strong) => core.storage.adjacentMemories(strong, now));
      mode = found.mode;
    }
    if (candidates.length === 0) {
      candidates = importantAndRecent(await newestMemories(core, req, filter), now);
      mode = "importance";
    }
  }
  const { shown, context, tokens, truncated } = fitToBudget(
    candidates,
    maxTokens,
    req.query === undefined ? [] : queryTerms(req.query),
  );
  return {
    context,
    memories: shown.map((c) => ({ ...toMemory(c.memory), score: c.score })),
    tokens,
    tokenizer: tokenizerName,
    truncated,
    mode,
  };
}
