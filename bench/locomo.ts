// LoCoMo retrieval benchmark (Maharana et al., ACL 2024; snap-research/LoCoMo, CC BY-NC 4.0: used
// for measuring, not copied into the project). Each conversation is one entity. Two sets:
// - turns: each dialog turn one raw memory, "Speaker: text" plus " [shares <image caption>]"
//   where the turn has one, its dialog id in metadata;
// - observations: each of the data set's observations one raw memory, its dialog id as evidence.
// Each question is the query of an entity-scoped POST /v1/memory/search (limit 10) in the modes
// keyword, semantic and hybrid, with memd's built-in embedder (builtin: the default, no endpoint
// set) and each reference embedder behind the real OpenAI embeddings wire protocol: USE-lite
// (bench/use-embedder.ts) and the test suite's fake embedder (test/fake-embedder.ts: hashed bag
// of words with character trigrams, 256 dimensions); none: --embedder none, keyword only.
// Figures per category and overall: hit@1/5/10 (any evidence turn in the top k), recall@5/10
// (share of the evidence found), all@10 (all of it in the top 10), MRR (first evidence within
// 10); search latency p50/p99 as the client sees it over HTTP on 127.0.0.1.
//   bun run bench/locomo.ts [--data PATH] [--embedders builtin,use,fake,none] [--sets turns,observations]
//                           [--json FILE] [--cache FILE] [--scope entity|namespace]
// --scope namespace stores each conversation in a namespace of its own and searches it
// namespace-wide (no entity): the same memories and the same BM25 statistics as the entity
// scope, through the namespace search's code (MaxScore over the lists), so keyword figures must
// come out the same.
// Default data: ../shared/datasets/locomo-dev.json (the dev half; see its README: tune on it only).
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { parseArgs } from "node:util";
import { startFakeEmbedder } from "../test/fake-embedder";
import { startTestServer, type TestServer, untilEmbedded } from "../test/helpers";
import { startUseEmbedder } from "./use-embedder";

type Turn = { speaker: string; dia_id: string; text: string; blip_caption?: string };
type Qa = { question: string; evidence: string[]; category: number; answer?: unknown };
type Sample = {
  sample_id: string;
  conversation: Record<string, unknown>;
  observation: Record<string, Record<string, [string, string][]>>;
  qa: Qa[];
};
type Doc = { entity: string; content: string; dia: string };
export type Mode = "keyword" | "semantic" | "hybrid";
export const categoryNames: Record<number, string> = {
  1: "multi-hop",
  2: "temporal",
  3: "open-domain",
  4: "single-hop",
  5: "adversarial",
};

export const defaultData = resolve(import.meta.dir, "../../shared/datasets/locomo-dev.json");

/** Dialog ids of an evidence list: "D8:6; D9:17" is two, "D:11:26" is D11:26, a bare "D" none. */
export function evidenceIds(evidence: string[]): string[] {
  const out = new Set<string>();
  for (const e of evidence)
    for (const part of e.split(/[;,\s]+/)) {
      const m = /^D:?(\d+):(\d+)$/.exec(part);
      if (m) out.add(`D${m[1]}:${m[2]}`);
    }
  return [...out];
}

export function loadLocomo(path: string) {
  const samples = JSON.parse(readFileSync(path, "utf8")) as Sample[];
  const turns: Doc[] = [];
  const observations: Doc[] = [];
  for (const s of samples) {
    for (const [k, v] of Object.entries(s.conversation))
      if (/^session_\d+$/.test(k) && Array.isArray(v))
        for (const t of v as Turn[])
          turns.push({
            entity: s.sample_id,
            dia: t.dia_id,
            content: `${t.speaker}: ${t.text}${t.blip_caption ? ` [shares ${t.blip_caption}]` : ""}`,
          });
    for (const session of Object.values(s.observation))
      for (const list of Object.values(session))
        for (const [text, dia] of list)
          for (const d of evidenceIds([String(dia)])) observations.push({ entity: s.sample_id, dia: d, content: text });
  }
  const questions = samples.flatMap((s) =>
    s.qa.map((q) => ({
      entity: s.sample_id,
      query: q.question,
      category: q.category,
      evidence: evidenceIds(q.evidence),
      answer: q.answer === undefined ? "" : String(q.answer),
    })),
  );
  return { turns, observations, questions, conversations: samples.length };
}

export interface Figures {
  n: number;
  hit1: number;
  hit5: number;
  hit10: number;
  recall5: number;
  recall10: number;
  all10: number;
  mrr: number;
}

/** Figures of ranked dialog-id lists against each question's evidence. */
export function score(ranked: string[][], evidence: string[][]): Figures {
  const f = { n: ranked.length, hit1: 0, hit5: 0, hit10: 0, recall5: 0, recall10: 0, all10: 0, mrr: 0 };
  ranked.forEach((r, i) => {
    const e = new Set(evidence[i]);
    const found = (k: number) => new Set(r.slice(0, k).filter((d) => e.has(d))).size;
    const first = r.findIndex((d) => e.has(d));
    if (first === 0) f.hit1++;
    if (first >= 0 && first < 5) f.hit5++;
    if (first >= 0 && first < 10) {
      f.hit10++;
      f.mrr += 1 / (first + 1);
    }
    if (e.size) {
      f.recall5 += found(5) / e.size;
      f.recall10 += found(10) / e.size;
      if (found(10) === e.size) f.all10++;
    }
  });
  const n = f.n || 1;
  return {
    n: f.n,
    hit1: f.hit1 / n,
    hit5: f.hit5 / n,
    hit10: f.hit10 / n,
    recall5: f.recall5 / n,
    recall10: f.recall10 / n,
    all10: f.all10 / n,
    mrr: f.mrr / n,
  };
}

const quantile = (xs: number[], q: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))] ?? 0;
};

export interface Run {
  set: string;
  embedder: string;
  mode: Mode;
  overall: Figures;
  byCategory: Record<string, Figures>;
  p50: number;
  p99: number;
}

/** Where a conversation's memories are stored and searched (--scope). */
const where = (namespace: string, entity: string, scope: "entity" | "namespace") =>
  scope === "entity" ? { namespace, entity } : { namespace: `${namespace}-${entity}` };

async function load(t: TestServer, namespace: string, docs: Doc[], scope: "entity" | "namespace") {
  let next = 0;
  const worker = async () => {
    while (next < docs.length) {
      const d = docs[next++];
      const r = await t.json("POST", "/v1/memory", {
        namespace: where(namespace, d.entity, scope).namespace,
        entity: d.entity,
        content: d.content,
        infer: false,
        metadata: { dia_id: d.dia },
      });
      if (r.status !== 200) throw new Error(`store answered ${r.status}: ${JSON.stringify(r.body)}`);
    }
  };
  await Promise.all(Array.from({ length: 8 }, worker));
}

async function ask(
  t: TestServer,
  namespace: string,
  mode: Mode,
  questions: ReturnType<typeof loadLocomo>["questions"],
  scope: "entity" | "namespace",
): Promise<{ ranked: string[][]; ms: number[] }> {
  const ranked: string[][] = [];
  const ms: number[] = [];
  for (const q of questions) {
    const t0 = performance.now();
    const r = await t.json("POST", "/v1/memory/search", {
      ...where(namespace, q.entity, scope),
      query: q.query,
      limit: 10,
      mode,
    });
    ms.push(performance.now() - t0);
    if (r.status !== 200) throw new Error(`search answered ${r.status}: ${JSON.stringify(r.body)}`);
    if (r.body.mode !== mode) throw new Error(`search answered in mode ${r.body.mode}, not ${mode}`);
    ranked.push(r.body.results.map((m: { metadata: { dia_id: string } }) => m.metadata.dia_id));
  }
  return { ranked, ms };
}

export interface ContextRun {
  set: string;
  embedder: string;
  /** The search mode the context block was built with (the server's default). */
  mode: string;
  budget: number;
  /** Questions with evidence. */
  n: number;
  /** Share of the questions with any evidence turn in the block, and with all of it. */
  any: number;
  all: number;
  /** The same for multi-hop questions (category 1), and their share of the evidence found. */
  multiHopAny: number;
  multiHopAll: number;
  multiHopRecall: number;
  /**
   * The share of a question's answer words (the data set's answer, lower-cased, a few function
   * words left out; categories 1-4) found in the block's text, on average: what a shortened line
   * (an excerpt) costs shows here, where evidence counts a memory however little of it is shown.
   */
  answerWords: number;
  /** Mean memories in the block, and tokens. */
  memories: number;
  tokens: number;
  p50: number;
  p99: number;
}

/** A text's words, lower-cased. */
const wordsOf = (s: string) => new Set(s.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? []);
const FUNCTION_WORDS = new Set(
  "a an the and or of in on at to for with is was by from her his their she he it they".split(" "),
);

/** Each question's POST /v1/memory/context (the question as query, entity-scoped, maxTokens `budget`). */
async function askContext(
  t: TestServer,
  namespace: string,
  questions: ReturnType<typeof loadLocomo>["questions"],
  budget: number,
  scope: "entity" | "namespace",
): Promise<Omit<ContextRun, "set" | "embedder">> {
  let any = 0;
  let all = 0;
  let n = 0;
  let mh = 0;
  let mhAny = 0;
  let mhAll = 0;
  let mhRecall = 0;
  let memories = 0;
  let tokens = 0;
  let answered = 0;
  let answerWords = 0;
  let mode = "";
  const ms: number[] = [];
  for (const q of questions) {
    const t0 = performance.now();
    const r = await t.json("POST", "/v1/memory/context", {
      ...where(namespace, q.entity, scope),
      ...(scope === "namespace" ? { entity: q.entity } : {}),
      query: q.query,
      maxTokens: budget,
    });
    ms.push(performance.now() - t0);
    if (r.status !== 200) throw new Error(`context answered ${r.status}: ${JSON.stringify(r.body)}`);
    if (r.body.tokens > budget) throw new Error(`context of ${r.body.tokens} tokens over ${budget}`);
    mode = r.body.mode === "importance" ? mode : r.body.mode;
    const shown = new Set<string>(r.body.memories.map((m: { metadata: { dia_id: string } }) => m.metadata.dia_id));
    memories += r.body.memories.length;
    tokens += r.body.tokens;
    const wanted = [...wordsOf(q.answer)].filter((w) => !FUNCTION_WORDS.has(w));
    if (q.category !== 5 && wanted.length > 0) {
      const inBlock = wordsOf(r.body.context);
      answered++;
      answerWords += wanted.filter((w) => inBlock.has(w)).length / wanted.length;
    }
    if (q.evidence.length === 0) continue;
    n++;
    const found = q.evidence.filter((d) => shown.has(d)).length;
    if (found > 0) any++;
    if (found === q.evidence.length) all++;
    if (q.category === 1) {
      mh++;
      if (found > 0) mhAny++;
      if (found === q.evidence.length) mhAll++;
      mhRecall += found / q.evidence.length;
    }
  }
  return {
    mode,
    budget,
    n,
    any: any / (n || 1),
    all: all / (n || 1),
    multiHopAny: mhAny / (mh || 1),
    multiHopAll: mhAll / (mh || 1),
    multiHopRecall: mhRecall / (mh || 1),
    answerWords: answerWords / (answered || 1),
    memories: memories / questions.length,
    tokens: tokens / questions.length,
    p50: quantile(ms, 0.5),
    p99: quantile(ms, 0.99),
  };
}

/** How deep multi-hop reach is read, and the depths it is reported at. */
const REACH_DEPTH = 100;
export const reachDepths = [10, 20, 50, 100] as const;

/**
 * Multi-hop reach: for each depth k, the share of multi-hop questions (category 1) whose evidence
 * is ALL among the first k hits of keyword search, of semantic search, and of either. It is the
 * ceiling of any block built from those lists (a reranker of the first k, say): a block holding
 * all of a question's evidence needs every evidence turn somewhere in its candidates.
 */
export interface ReachRun {
  embedder: string;
  n: number;
  keyword: number[];
  semantic?: number[];
  either?: number[];
}

async function multiHopReach(
  t: TestServer,
  namespace: string,
  questions: ReturnType<typeof loadLocomo>["questions"],
  embedder: string,
  scope: "entity" | "namespace",
): Promise<ReachRun> {
  const multiHop = questions.filter((q) => q.category === 1 && q.evidence.length > 0);
  const list = async (q: (typeof multiHop)[number], mode: Mode) => {
    const r = await t.json("POST", "/v1/memory/search", {
      ...where(namespace, q.entity, scope),
      query: q.query,
      limit: REACH_DEPTH,
      mode,
    });
    if (r.status !== 200) throw new Error(`search answered ${r.status}: ${JSON.stringify(r.body)}`);
    return r.body.results.map((m: { metadata: { dia_id: string } }) => m.metadata.dia_id) as string[];
  };
  const semantic = embedder !== "none";
  const lists: { evidence: string[]; k: string[]; s: string[] }[] = [];
  for (const q of multiHop)
    lists.push({ evidence: q.evidence, k: await list(q, "keyword"), s: semantic ? await list(q, "semantic") : [] });
  const share = (within: (l: (typeof lists)[number], k: number) => Set<string>) =>
    reachDepths.map(
      (k) => lists.filter((l) => l.evidence.every((e) => within(l, k).has(e))).length / (lists.length || 1),
    );
  return {
    embedder,
    n: lists.length,
    keyword: share((l, k) => new Set(l.k.slice(0, k))),
    ...(semantic
      ? {
          semantic: share((l, k) => new Set(l.s.slice(0, k))),
          either: share((l, k) => new Set([...l.k.slice(0, k), ...l.s.slice(0, k)])),
        }
      : {}),
  };
}

export async function locomoBench(o: {
  data: string;
  embedders: string[];
  sets: string[];
  modes?: Mode[];
  cacheFile?: string;
  scope?: "entity" | "namespace";
  /** Context blocks measured on the turns set at these budgets (none: no context figures). */
  contextBudgets?: number[];
  contextRuns?: ContextRun[];
  /** With contextBudgets: multi-hop reach (multiHopReach), one per embedder. */
  reachRuns?: ReachRun[];
  log?: (s: string) => void;
}): Promise<Run[]> {
  const scope = o.scope ?? "entity";
  const log = o.log ?? ((s: string) => console.log(s));
  const data = loadLocomo(o.data);
  log(
    `LoCoMo: ${data.conversations} conversations, ${data.turns.length} turns, ${data.observations.length} observations, ${data.questions.length} questions`,
  );
  const runs: Run[] = [];
  const modes = o.modes ?? ["keyword", "semantic", "hybrid"];
  for (const embedder of o.embedders) {
    let env: Record<string, string> = {};
    let stopEmbedder = async () => {};
    if (embedder === "use") {
      const e = await startUseEmbedder({ cacheFile: o.cacheFile });
      env = { MEMD_EMBED_BASE_URL: e.url, MEMD_EMBED_MODEL: "use-lite", MEMD_EMBED_TIMEOUT_MS: "120000" };
      stopEmbedder = async () => {
        log(`USE-lite embedded ${e.computed} texts not in its cache`);
        await e.stop();
      };
    } else if (embedder === "none") {
      env = { MEMD_EMBEDDER: "none" };
    } else if (embedder === "fake") {
      const e = startFakeEmbedder({ dimensions: 256, trigrams: true });
      env = { MEMD_EMBED_BASE_URL: e.url, MEMD_EMBED_MODEL: "fake", MEMD_EMBED_TIMEOUT_MS: "120000" };
      stopEmbedder = () => e.stop();
    }
    const t = await startTestServer({ env: { ...env, MEMD_LOG_LEVEL: "warn" } });
    try {
      for (const set of o.sets) {
        const docs = set === "turns" ? data.turns : data.observations;
        const namespace = `locomo-${set}`;
        const t0 = performance.now();
        await load(t, namespace, docs, scope);
        // Every memory with its vector before the first question (the built-in embedder writes
        // them on a thread of its own; a search waits for that backlog at most a second): what
        // is measured is the ranking, not how far the thread had got.
        await untilEmbedded(t);
        log(`${embedder}: stored ${docs.length} ${set} in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
        if (set === "turns")
          for (const budget of o.contextBudgets ?? []) {
            const c = { set, embedder, ...(await askContext(t, namespace, data.questions, budget, scope)) };
            o.contextRuns?.push(c);
            log(
              `context ${set} ${c.mode} ${embedder} ${budget} tokens: any ${c.any.toFixed(3)} all ${c.all.toFixed(3)} multi-hop all ${c.multiHopAll.toFixed(3)} recall ${c.multiHopRecall.toFixed(3)} answer words ${c.answerWords.toFixed(3)} memories ${c.memories.toFixed(1)} p50 ${c.p50.toFixed(2)} ms`,
            );
          }
        if (set === "turns" && (o.contextBudgets ?? []).length > 0) {
          const r = await multiHopReach(t, namespace, data.questions, embedder, scope);
          o.reachRuns?.push(r);
          const at = (xs: number[] | undefined) => (xs ?? []).map((x) => x.toFixed(3)).join(" / ");
          log(
            `multi-hop reach ${embedder} (all evidence within the first ${reachDepths.join(" / ")}): keyword ${at(r.keyword)}${r.either ? ` semantic ${at(r.semantic)} either ${at(r.either)}` : ""}`,
          );
        }
        for (const mode of modes) {
          if (embedder === "none" && mode !== "keyword") continue;
          // Keyword search does not depend on the embedder: measured with the first one only.
          if (mode === "keyword" && embedder !== o.embedders[0]) continue;
          const { ranked, ms } = await ask(t, namespace, mode, data.questions, scope);
          const evidence = data.questions.map((q) => q.evidence);
          const byCategory: Record<string, Figures> = {};
          for (const c of Object.keys(categoryNames).map(Number)) {
            const idx = data.questions.flatMap((q, i) => (q.category === c ? [i] : []));
            byCategory[c] = score(
              idx.map((i) => ranked[i]),
              idx.map((i) => evidence[i]),
            );
          }
          const run: Run = {
            set,
            embedder: mode === "keyword" ? "-" : embedder,
            mode,
            overall: score(ranked, evidence),
            byCategory,
            p50: quantile(ms, 0.5),
            p99: quantile(ms, 0.99),
          };
          runs.push(run);
          log(
            `${set} ${mode} ${run.embedder}: hit@5 ${run.overall.hit5.toFixed(3)} hit@10 ${run.overall.hit10.toFixed(3)} MRR ${run.overall.mrr.toFixed(3)} p50 ${run.p50.toFixed(2)} ms`,
          );
        }
      }
    } finally {
      await t.stop();
      await stopEmbedder();
    }
  }
  return runs;
}

const f3 = (x: number) => x.toFixed(3);

/** Issue 21's targets against the runs (turns set; hybrid against the better single mode on both sets). */
export function locomoTargets(runs: Run[]): string[] {
  const get = (set: string, mode: Mode, embedder: string) =>
    runs.find((r) => r.set === set && r.mode === mode && r.embedder === embedder);
  const ok = (b: boolean) => (b ? "met" : "**missed**");
  const out = ["| target (LoCoMo) | figure | |", "| --- | --- | --- |"];
  const kw = get("turns", "keyword", "-");
  if (kw) {
    out.push(`| keyword hit@5 ≥ 0.62, turns | ${f3(kw.overall.hit5)} | ${ok(kw.overall.hit5 >= 0.62)} |`);
    out.push(`| keyword hit@10 ≥ 0.70, turns | ${f3(kw.overall.hit10)} | ${ok(kw.overall.hit10 >= 0.7)} |`);
    out.push(`| keyword search p50 < 5 ms, turns | ${kw.p50.toFixed(2)} ms | ${ok(kw.p50 < 5)} |`);
    for (const set of ["turns", "observations"]) {
      const k = get(set, "keyword", "-");
      const b = get(set, "hybrid", "builtin");
      if (!k || !b) continue;
      out.push(
        `| hybrid (built-in) hit@10 ≥ keyword + 0.02, ${set} | ${f3(b.overall.hit10)} against ${f3(k.overall.hit10 + 0.02)} | ${ok(b.overall.hit10 >= k.overall.hit10 + 0.02 - 1e-9)} |`,
        `| hybrid (built-in) hit@5 ≥ keyword, ${set} | ${f3(b.overall.hit5)} against ${f3(k.overall.hit5)} | ${ok(b.overall.hit5 >= k.overall.hit5)} |`,
      );
    }
    const use = get("turns", "hybrid", "use");
    if (use) {
      out.push(
        `| hybrid (USE-lite) hit@10 ≥ keyword + 0.03, turns | ${f3(use.overall.hit10)} against ${f3(kw.overall.hit10 + 0.03)} | ${ok(use.overall.hit10 >= kw.overall.hit10 + 0.03 - 1e-9)} |`,
      );
      out.push(
        `| hybrid (USE-lite) hit@5 ≥ keyword, turns | ${f3(use.overall.hit5)} against ${f3(kw.overall.hit5)} | ${ok(use.overall.hit5 >= kw.overall.hit5)} |`,
      );
    }
  }
  for (const r of runs.filter((r) => r.mode === "hybrid")) {
    const k = get(r.set, "keyword", "-");
    const s = get(r.set, "semantic", r.embedder);
    if (!k || !s) continue;
    for (const [cut, of] of [
      ["5", (x: Run) => x.overall.hit5],
      ["10", (x: Run) => x.overall.hit10],
    ] as const) {
      const best = Math.max(of(k), of(s));
      out.push(
        `| hybrid (${r.embedder}) hit@${cut} ≥ the better single mode, ${r.set} | ${f3(of(r))} against ${f3(best)} | ${ok(of(r) >= best)} |`,
      );
    }
  }
  return [...out, ""];
}

/**
 * Issue 36's starting point on the dev half (the code before it, same data and probe), printed
 * beside each figure: context at 1,000 tokens in keyword mode, keyword search, multi-hop.
 */
export const issue36Before = {
  contextAny: 0.767,
  contextAll: 0.672,
  multiHopAll: 0.254,
  /** The issue's "recall 0.486": the share of a multi-hop question's evidence in the block. */
  multiHopRecall: 0.486,
  keywordHit5: 0.628,
  keywordHit10: 0.708,
  useHybridHit10: 0.739,
};

/** Issue 36's LoCoMo targets against the runs (turns set), each with its dev-half baseline. */
export function issue36Targets(runs: Run[], contexts: ContextRun[]): string[] {
  const ok = (b: boolean) => (b ? "met" : "**missed**");
  const b = issue36Before;
  const out = ["| target (issue 36, LoCoMo dev half, turns) | before | now | |", "| --- | --- | --- | --- |"];
  const kc = contexts.find((c) => c.mode === "keyword" && c.budget === 1000);
  if (kc) {
    out.push(
      `| context 1,000 tokens, keyword: evidence any ≥ 0.85 | ${f3(b.contextAny)} | ${f3(kc.any)} | ${ok(kc.any >= 0.85)} |`,
    );
    out.push(
      `| context 1,000 tokens, keyword: evidence all ≥ 0.75 | ${f3(b.contextAll)} | ${f3(kc.all)} | ${ok(kc.all >= 0.75)} |`,
    );
    out.push(
      `| context 1,000 tokens, keyword: multi-hop all ≥ 0.45 | ${f3(b.multiHopAll)} | ${f3(kc.multiHopAll)} | ${ok(kc.multiHopAll >= 0.45)} |`,
    );
    out.push(
      `| context 1,000 tokens, keyword: multi-hop recall (no target) | ${f3(b.multiHopRecall)} | ${f3(kc.multiHopRecall)} | |`,
    );
    for (const h of contexts.filter((c) => c.mode === "hybrid" && c.budget === 1000))
      for (const [name, of] of [
        ["any", (c: ContextRun) => c.any],
        ["all", (c: ContextRun) => c.all],
      ] as const)
        out.push(
          `| context 1,000 tokens, hybrid (${h.embedder}) evidence ${name} ≥ keyword's | | ${f3(of(h))} against ${f3(of(kc))} | ${ok(of(h) >= of(kc))} |`,
        );
  }
  const kw = runs.find((r) => r.set === "turns" && r.mode === "keyword");
  if (kw) {
    out.push(`| keyword hit@5 (no target) | ${f3(b.keywordHit5)} | ${f3(kw.overall.hit5)} | |`);
    out.push(
      `| keyword hit@10 ≥ 0.75 | ${f3(b.keywordHit10)} | ${f3(kw.overall.hit10)} | ${ok(kw.overall.hit10 >= 0.75)} |`,
    );
  }
  const use = runs.find((r) => r.set === "turns" && r.mode === "hybrid" && r.embedder === "use");
  if (use)
    out.push(
      `| hybrid (USE-lite) hit@10 ≥ 0.78 | ${f3(b.useHybridHit10)} | ${f3(use.overall.hit10)} | ${ok(use.overall.hit10 >= 0.78)} |`,
    );
  return [...out, ""];
}

/** Markdown table of multi-hop reach (multiHopReach). */
export function reachTable(runs: ReachRun[]): string[] {
  if (runs.length === 0) return [];
  const cells = (xs: number[] | undefined) => reachDepths.map((_, i) => (xs ? f3(xs[i]) : "")).join(" | ");
  return [
    `#### turns: multi-hop reach (${runs[0].n} questions): all of a question's evidence among the first k hits, the ceiling of a block built from those lists`,
    "",
    `| embedder | list | ${reachDepths.map((k) => `k = ${k}`).join(" | ")} |`,
    `| --- | --- | ${reachDepths.map(() => "---").join(" | ")} |`,
    ...runs.flatMap((r) => [
      ...(r.embedder === runs[0].embedder ? [`| - | keyword | ${cells(r.keyword)} |`] : []),
      ...(r.semantic
        ? [
            `| ${r.embedder} | semantic | ${cells(r.semantic)} |`,
            `| ${r.embedder} | keyword or semantic | ${cells(r.either)} |`,
          ]
        : []),
    ]),
    "",
  ];
}

/** Markdown table of the context runs. */
export function contextTable(runs: ContextRun[]): string[] {
  if (runs.length === 0) return [];
  return [
    "#### turns: the context block (POST /v1/memory/context, the question as query)",
    "",
    "| mode | embedder | budget | evidence any | all | multi-hop any | multi-hop all | multi-hop recall | answer words in the block | memories | tokens | p50 | p99 |",
    "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ...runs.map(
      (r) =>
        `| ${r.mode} | ${r.embedder} | ${r.budget} | ${f3(r.any)} | ${f3(r.all)} | ${f3(r.multiHopAny)} | ${f3(r.multiHopAll)} | ${f3(r.multiHopRecall)} | ${f3(r.answerWords)} | ${r.memories.toFixed(1)} | ${r.tokens.toFixed(0)} | ${r.p50.toFixed(2)} ms | ${r.p99.toFixed(2)} ms |`,
    ),
    "",
  ];
}

/** Markdown tables of the runs: overall, then per category. */
export function locomoTables(runs: Run[]): string[] {
  const out: string[] = [];
  for (const set of [...new Set(runs.map((r) => r.set))]) {
    const rs = runs.filter((r) => r.set === set);
    out.push(
      `#### ${set}: overall (${rs[0].overall.n} questions)`,
      "",
      "| mode | embedder | hit@1 | hit@5 | hit@10 | recall@5 | recall@10 | all@10 | MRR | search p50 | p99 |",
      "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
      ...rs.map(
        (r) =>
          `| ${r.mode} | ${r.embedder} | ${f3(r.overall.hit1)} | ${f3(r.overall.hit5)} | ${f3(r.overall.hit10)} | ${f3(r.overall.recall5)} | ${f3(r.overall.recall10)} | ${f3(r.overall.all10)} | ${f3(r.overall.mrr)} | ${r.p50.toFixed(2)} ms | ${r.p99.toFixed(2)} ms |`,
      ),
      "",
      `#### ${set}: per category`,
      "",
      "| mode | embedder | category | questions | hit@1 | hit@5 | hit@10 | recall@5 | recall@10 | all@10 | MRR |",
      "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
      ...rs.flatMap((r) =>
        Object.entries(r.byCategory).map(
          ([c, f]) =>
            `| ${r.mode} | ${r.embedder} | ${c} ${categoryNames[Number(c)]} | ${f.n} | ${f3(f.hit1)} | ${f3(f.hit5)} | ${f3(f.hit10)} | ${f3(f.recall5)} | ${f3(f.recall10)} | ${f3(f.all10)} | ${f3(f.mrr)} |`,
        ),
      ),
      "",
    );
  }
  return out;
}

if (import.meta.main) {
  const { values } = parseArgs({
    options: {
      data: { type: "string" },
      embedders: { type: "string" },
      sets: { type: "string" },
      modes: { type: "string" },
      json: { type: "string" },
      cache: { type: "string" },
      scope: { type: "string" },
      context: { type: "string" },
    },
  });
  const data = values.data ?? defaultData;
  if (!existsSync(data)) {
    console.error(`no LoCoMo data at ${data}: pass --data PATH (data/locomo10.json of snap-research/LoCoMo)`);
    process.exit(2);
  }
  const contextRuns: ContextRun[] = [];
  const reachRuns: ReachRun[] = [];
  const runs = await locomoBench({
    data,
    contextBudgets: values.context ? values.context.split(",").map(Number) : [],
    contextRuns,
    reachRuns,
    embedders: (values.embedders ?? "builtin,use,fake").split(","),
    sets: (values.sets ?? "turns,observations").split(","),
    modes: values.modes?.split(",") as Mode[] | undefined,
    cacheFile: values.cache,
    scope: values.scope === "namespace" ? "namespace" : "entity",
  });
  console.log(
    [
      ...issue36Targets(runs, contextRuns),
      ...locomoTargets(runs),
      ...contextTable(contextRuns),
      ...reachTable(reachRuns),
      ...locomoTables(runs),
    ].join("\n"),
  );
  if (values.json) {
    mkdirSync(dirname(values.json), { recursive: true });
    writeFileSync(values.json, JSON.stringify(runs, null, 1));
  }
}
