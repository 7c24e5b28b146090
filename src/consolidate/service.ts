// Consolidation that loses nothing (issue 33): the near-duplicate memories of an entity merged
// into one kept memory, with a MERGE event naming the merged ones and a DELETE for each naming
// where it went; so a restore to the moment before undoes it. Without a model only what is
// clearly the same fact is merged (same-fact.ts); with one, the model judges each such group and
// may give its merged text. One write per run, refused and planned again if the entity changed.
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { generateText } from "ai";
import { toAuditEvent } from "../audit/service";
import type { Core } from "../core";
import { newCost, withVectors } from "../embedding/client";
import type { LlmSettings } from "../extraction/llm";
import { llmSettings } from "../extraction/service";
import type { IdempotencySlot } from "../http/idempotency";
import { toMemory } from "../memory/service";
import type { MemoryRecord } from "../storage/records";
import { type Applied, type MemoryOp, type MemoryPatch, WriteConflict } from "../storage/storage";
import { ApiError } from "../wire/errors";
import type { ConsolidatedGroup, ConsolidateRequest, ConsolidateResponse } from "./model";
import { groupSameFacts } from "./same-fact";

/** Running totals for /metrics. */
export const consolidationStats = { runs: 0, groups: 0, memoriesMerged: 0, seconds: 0, modelCalls: 0 };

/** The figures of consolidationStats in Prometheus text. */
export function consolidationMetrics(): string {
  const c = consolidationStats;
  const line = (name: string, help: string, v: number) =>
    `# HELP ${name} ${help}\n# TYPE ${name} counter\n${name} ${v}`;
  return [
    line("memd_consolidation_runs_total", "Consolidations applied (not dry runs), by request or schedule.", c.runs),
    line("memd_consolidation_groups_total", "Groups of near-duplicate memories merged.", c.groups),
    line("memd_consolidation_memories_merged_total", "Memories merged into another and deleted.", c.memoriesMerged),
    line("memd_consolidation_seconds_total", "Time spent consolidating.", c.seconds),
    line("memd_consolidation_model_calls_total", "Model calls made to judge groups.", c.modelCalls),
  ].join("\n");
}

const ATTEMPTS = 8;

/** Every current memory of an entity, as stored. */
async function currentOfEntity(core: Core, namespace: string, entity: string): Promise<MemoryRecord[]> {
  const out: MemoryRecord[] = [];
  for (let page = await core.storage.listMemories({ namespace, entity, limit: 1000 }); ; ) {
    out.push(...page.memories);
    if (page.next === undefined) return out;
    page = await core.storage.listMemories({ namespace, entity, limit: 1000, before: page.next });
  }
}

/** The memory a group keeps: the most important, then the oldest (its id is the one known longest). */
const keptOf = (group: MemoryRecord[]) =>
  [...group].sort((a, b) => b.importance - a.importance || (a.id < b.id ? -1 : 1))[0];

interface Plan {
  kept: MemoryRecord;
  merged: MemoryRecord[];
  content: string;
  by: "rules" | "model";
  reason: string;
}

/**
 * The model's judgement of a group: one fact (and its merged text) or not. Undefined when the
 * model fails or answers nonsense: the group is then merged by the rules, which already hold it
 * to be one fact.
 */
async function judge(
  settings: LlmSettings,
  texts: string[],
): Promise<{ same: boolean; content: string; reason: string } | undefined> {
  const provider = createOpenAICompatible({ name: "memd", baseURL: settings.baseUrl, apiKey: settings.apiKey });
  consolidationStats.modelCalls++;
  try {
    const result = await generateText({
      model: provider.chatModel(settings.model),
      system:
        'You consolidate a memory store. Given memories of one person or thing, say whether they all state one and the same fact. If they do, write that fact once, in one short sentence, losing no detail any of them holds. Answer only JSON: {"same": true|false, "content": "the merged fact", "reason": "why"}.',
      prompt: texts.map((x, i) => `${i + 1}. ${x}`).join("\n"),
      maxRetries: 0,
      abortSignal: AbortSignal.timeout(settings.timeoutMs ?? 30_000),
    });
    const text = result.text.replace(/^```(?:json)?\s*|\s*```$/g, "");
    const v = JSON.parse(text) as { same?: unknown; content?: unknown; reason?: unknown };
    if (typeof v.same !== "boolean") return undefined;
    const content = typeof v.content === "string" && v.content.trim() ? v.content.trim() : "";
    if (v.same && !content) return undefined;
    return { same: v.same, content, reason: typeof v.reason === "string" ? v.reason.slice(0, 200) : "" };
  } catch {
    return undefined;
  }
}

/** The groups of an entity's current memories to merge, and what each keeps. */
async function planGroups(core: Core, memories: MemoryRecord[]): Promise<Plan[]> {
  // Keyed facts are left alone (docs/keyed-facts.md), and so are memories with an expiry: merged
  // into another, its expiry would be lost or imposed.
  const eligible = memories.filter((m) => m.key === undefined && m.expiresAt === undefined);
  eligible.sort((a, b) => (a.id < b.id ? -1 : 1));
  const settings = llmSettings(core);
  const plans: Plan[] = [];
  for (const group of groupSameFacts(eligible, (m) => m.content)) {
    const kept = keptOf(group);
    const merged = group.filter((m) => m !== kept);
    const names = merged.map((m) => m.id).join(", ");
    const verdict = settings
      ? await judge(
          settings,
          group.map((m) => m.content),
        )
      : undefined;
    if (verdict && !verdict.same) continue;
    if (verdict)
      plans.push({
        kept,
        merged,
        content: verdict.content,
        by: "model",
        reason: `consolidated (model: ${verdict.reason || "one fact"}): merged ${names}`,
      });
    else plans.push({ kept, merged, content: kept.content, by: "rules", reason: `consolidated: merged ${names}` });
  }
  return plans;
}

const union = (lists: (string[] | undefined)[]) => {
  const all = [...new Set(lists.flatMap((l) => l ?? []))];
  return all.length ? all.slice(0, 32) : undefined;
};

function opsOf(p: Plan): MemoryOp[] {
  const all = [p.kept, ...p.merged];
  const tags = union(all.map((m) => m.tags));
  const metadata = Object.assign({}, ...[...p.merged].reverse().map((m) => m.metadata ?? {}), p.kept.metadata ?? {});
  const patch: MemoryPatch = {
    importance: Math.max(...all.map((m) => m.importance)),
  };
  if (p.content !== p.kept.content) patch.content = p.content;
  if (tags) patch.tags = tags;
  if (Object.keys(metadata).length) patch.metadata = metadata;
  return [
    { event: "MERGE", target: p.kept.id, patch, reason: p.reason, mergedIds: p.merged.map((m) => m.id) },
    ...p.merged.map(
      (m): MemoryOp => ({
        event: "DELETE",
        target: m.id,
        reason: `consolidated into ${p.kept.id}`,
        mergedInto: p.kept.id,
      }),
    ),
  ];
}

/** Consolidates an entity (ConsolidateRequest); `actorKeyId` null for the schedule. */
export async function consolidateEntity(
  core: Core,
  req: ConsolidateRequest,
  actorKeyId: string | null,
  idempotency?: IdempotencySlot,
): Promise<ConsolidateResponse> {
  const started = performance.now();
  const { namespace, entity } = req;
  for (let attempt = 1; ; attempt++) {
    const [newest] = await core.storage.newestEvents({ namespace, entity }, 1);
    const plans = await planGroups(core, await currentOfEntity(core, namespace, entity));
    const answer = (applied: readonly (Applied | null)[]): ConsolidateResponse => {
      const after = new Map<string, MemoryRecord>();
      for (const a of applied) if (a) after.set(a.memory.id, a.memory);
      const groups: ConsolidatedGroup[] = plans.map((p) => {
        const kept = after.get(p.kept.id) ?? { ...p.kept, content: p.content };
        return { kept: toMemory(kept), merged: p.merged.map((m) => toMemory(m)), by: p.by, reason: p.reason };
      });
      return {
        namespace,
        entity,
        dryRun: req.dryRun === true,
        groups,
        memoriesMerged: plans.reduce((n, p) => n + p.merged.length, 0),
        tookMs: Math.round((performance.now() - started) * 100) / 100,
        events: applied.filter((a): a is Applied => a !== null).map((a) => toAuditEvent(a.event)),
      };
    };
    if (req.dryRun) return answer([]);
    if (plans.length === 0) {
      consolidationStats.runs++; // an applied run that found nothing to merge is a run too
      return answer([]);
    }
    const ops = plans.flatMap(opsOf);
    (ops[0] as { entityLastEventAtMs?: number }).entityLastEventAtMs = newest?.atMs ?? 0;
    const embedded = plans.some((p) => p.by === "model") ? await withVectors(core, ops, newCost()) : ops;
    try {
      const applied = await core.storage.apply(embedded, actorKeyId, undefined, idempotency?.record(answer));
      const done = answer(applied);
      consolidationStats.runs++;
      consolidationStats.groups += done.groups.length;
      consolidationStats.memoriesMerged += done.memoriesMerged;
      consolidationStats.seconds += done.tookMs / 1000;
      return done;
    } catch (e) {
      if (!(e instanceof WriteConflict)) throw e;
      if (attempt >= ATTEMPTS)
        throw new ApiError("conflict", "the entity kept changing while it was consolidated; try again");
      await Bun.sleep(Math.random() * 25 * attempt);
    }
  }
}

/**
 * One background pass (MEMD_CONSOLIDATE_EVERY): consolidates every entity with an event after
 * `since` (ms), namespace by namespace, and answers the time to start the next pass from. Events
 * the pass itself writes come after that time, so each entity it merged is looked at once more.
 */
export async function consolidateChanged(core: Core, since: number): Promise<number> {
  const started = Date.now();
  for (let after: string | undefined; ; ) {
    const page = await core.storage.namespaces({ after, limit: 100 });
    for (const { namespace, lastEventAtMs } of page) {
      if (lastEventAtMs <= since) continue;
      const entities = new Set<string>();
      for (let from = since; ; ) {
        const events = await core.storage.eventsAfter({ namespace }, from, 1000);
        for (const e of events) if (e.atMs <= started) entities.add(e.entity);
        if (events.length < 1000 || events.at(-1)!.atMs > started) break;
        from = events.at(-1)!.atMs;
      }
      for (const entity of entities) {
        try {
          await consolidateEntity(core, { namespace, entity }, null);
        } catch (e) {
          core.logger.warn("background consolidation skipped an entity", { namespace, entity, error: String(e) });
        }
      }
    }
    if (page.length < 100) return started;
    after = page.at(-1)!.namespace;
  }
}

/** Runs consolidateChanged every `seconds` until stopped (off when 0). */
export function startConsolidation(core: Core, seconds: number): () => Promise<void> {
  if (seconds <= 0) return async () => {};
  let since = Date.now();
  let running: Promise<unknown> = Promise.resolve();
  let stopped = false;
  const timer = setInterval(() => {
    running = running.then(async () => {
      if (stopped) return;
      try {
        since = await consolidateChanged(core, since);
      } catch (e) {
        core.logger.error("background consolidation failed", { error: String(e) });
      }
    });
  }, seconds * 1000);
  return async () => {
    stopped = true;
    clearInterval(timer);
    await running;
  };
}
