// The reconcile step: turns the model's operations into checked changes, then
// writes them with their audit events in one transaction. The model's answer
// is untrusted (the content it read may be an attack), so an operation can
// only act on a memory through a handle that this request offered.
import { limits } from "../config/limits";
import type { Core } from "../core";
import { type EmbedCost, newCost, withVectors } from "../embedding/client";
import type { IdempotencySlot } from "../http/idempotency";
import type { Logger } from "../log";
import type { MemoryRecord, ObserveChanges, StoreRequest, StoreResponse } from "../memory/model";
import { newMemory, toMemory } from "../memory/service";
import type { Applied, MemoryOp } from "../storage/storage";
import { hasControl } from "../wire/schemas";
import { normalizeFact } from "./builtin";
import { NOT_A_CATEGORY, type Operation } from "./model";

/** A checked change. `target` is a memory this request offered (or found as an exact duplicate). */
export type Change =
  | { kind: "ADD"; fact: string; category?: string; importance?: number }
  | { kind: "SKIP_DUPLICATE"; fact: string; target: MemoryRecord }
  | { kind: "MERGE"; fact: string; target: MemoryRecord; content: string }
  | { kind: "REPLACE"; fact: string; target: MemoryRecord; reason: string; category?: string; importance?: number }
  | { kind: "KEEP_EXISTING"; fact: string; target: MemoryRecord; reason: string }
  | { kind: "DELETE"; fact: string; target: MemoryRecord; reason: string };

const MAX_REASON = limits.reasonChars;
/** A smart-store memory's category when the extractor gives none (or one of a bad shape); the answer schema's default too. */
export const FACT_CATEGORY = "fact";

function cleanCategory(c: string | undefined): string | undefined {
  const s = c?.trim();
  return s && s.length <= limits.categoryChars && !hasControl(s) ? s : undefined;
}

function cleanImportance(n: number | undefined): number | undefined {
  return typeof n === "number" && Number.isFinite(n) ? Math.min(1, Math.max(0, n)) : undefined;
}

function cleanReason(r: string | undefined, fallback: string): string {
  const s = r
    ?.replace(/\p{Cc}+/gu, " ")
    .trim()
    .slice(0, MAX_REASON);
  return s || fallback;
}

/**
 * Checks the model's operations against the offered memories (`handles`) and the entity's
 * current memories (`current`), before anything is written. An operation with an unoffered
 * handle, a missing target, an empty or oversized fact, or a second change to one memory is
 * dropped and logged (without content). An ADD of a fact that exactly duplicates a current
 * memory becomes a SKIP_DUPLICATE on it; a repeated ADD in the same answer is dropped and
 * counted in `repeated` (skipped, as the built-in extractor counts a repeated sentence).
 */
export function validateOperations(
  ops: readonly Operation[],
  handles: ReadonlyMap<string, MemoryRecord>,
  current: readonly MemoryRecord[],
  logger: Logger,
  maxFactBytes: number,
  /** Memories this request already decided (exact duplicates settled before the model): not changed again. */
  decided: ReadonlySet<string> = new Set(),
): { changes: Change[]; repeated: number } {
  const byNorm = new Map(current.map((m) => [normalizeFact(m.content), m]));
  const added = new Set<string>();
  const changed = new Set<string>();
  const retired = new Set<string>();
  /** The checked change, or why the operation is dropped. */
  const check = (op: Operation): Change | string => {
    const fact = op.fact.trim();
    if (!fact) return "empty fact";
    if (Buffer.byteLength(fact, "utf8") > maxFactBytes) return "fact too long";
    if (op.category === NOT_A_CATEGORY) return "category not a string";
    const category = cleanCategory(op.category);
    const importance = cleanImportance(op.importance);
    if (op.decision === "ADD") {
      const norm = normalizeFact(fact);
      const existing = byNorm.get(norm);
      if (existing && !retired.has(existing.id)) return { kind: "SKIP_DUPLICATE", fact, target: existing };
      if (added.has(norm)) return "repeated fact";
      added.add(norm);
      return { kind: "ADD", fact, category, importance };
    }
    if (op.target === undefined) return "missing target";
    const target = handles.get(op.target.trim());
    if (!target) return "unoffered handle";
    if (retired.has(target.id)) return "target already retired by this answer";
    const changes = op.decision === "MERGE" || op.decision === "REPLACE" || op.decision === "DELETE";
    if (changes && changed.has(target.id)) return "second change to one memory";
    // A memory decided once in a request is decided: a SKIP_DUPLICATE on it stays the answer.
    if (changes && decided.has(target.id)) return "memory already decided in this request";
    switch (op.decision) {
      case "SKIP_DUPLICATE":
        return { kind: "SKIP_DUPLICATE", fact, target };
      case "KEEP_EXISTING":
        return { kind: "KEEP_EXISTING", fact, target, reason: cleanReason(op.reason, "conflict") };
      case "MERGE": {
        const content = op.mergedContent?.trim();
        if (!content) return "MERGE without mergedContent";
        if (Buffer.byteLength(content, "utf8") > maxFactBytes) return "mergedContent too long";
        // A merge that changes nothing is a duplicate, not an update.
        if (normalizeFact(content) === normalizeFact(target.content)) return { kind: "SKIP_DUPLICATE", fact, target };
        changed.add(target.id);
        return { kind: "MERGE", fact, target, content };
      }
      case "REPLACE":
        changed.add(target.id);
        retired.add(target.id);
        return { kind: "REPLACE", fact, target, reason: cleanReason(op.reason, "contradiction"), category, importance };
      case "DELETE":
        changed.add(target.id);
        retired.add(target.id);
        return { kind: "DELETE", fact, target, reason: cleanReason(op.reason, "no longer true") };
    }
  };
  const changes: Change[] = [];
  let repeated = 0;
  ops.forEach((op, index) => {
    const result = check(op);
    if (result === "repeated fact") repeated++;
    if (typeof result === "string")
      logger.warn("dropped model operation", { index, decision: op.decision, why: result });
    else changes.push(result);
  });
  return { changes, repeated };
}

/** The storage op that carries out a checked change. */
function opOf(req: StoreRequest, c: Change): MemoryOp {
  switch (c.kind) {
    case "ADD":
      return {
        event: "ADD",
        create: newMemory(req, { content: c.fact, category: c.category ?? FACT_CATEGORY, importance: c.importance }),
      };
    case "SKIP_DUPLICATE":
      return { event: "SKIP_DUPLICATE", target: c.target.id, newContent: c.fact };
    case "KEEP_EXISTING":
      return { event: "KEEP_EXISTING", target: c.target.id, newContent: c.fact, reason: c.reason };
    case "MERGE":
      return { event: "MERGE", target: c.target.id, patch: { content: c.content } };
    case "REPLACE": {
      const fact = { content: c.fact, category: c.category ?? c.target.category, importance: c.importance };
      return { event: "REPLACE", create: newMemory(req, fact), target: c.target.id, reason: c.reason };
    }
    case "DELETE":
      return { event: "DELETE", target: c.target.id, reason: c.reason };
  }
}

/**
 * Writes the changes and their audit events in one durable transaction. A target that stopped
 * being current since it was offered (deleted, expired) is skipped inside it and logged.
 * Returns the store response: every memory created or changed, and the counts.
 * `extraSkipped` counts duplicates that had no memory to attach an event to.
 */
export async function applyChanges(
  core: Core,
  req: StoreRequest,
  actorKeyId: string | null,
  changes: readonly Change[],
  extraSkipped = 0,
  cost: EmbedCost = newCost(),
  idempotency?: IdempotencySlot,
  observe?: ObserveChanges,
): Promise<StoreResponse> {
  // New and changed contents are embedded in one call, before the write transaction.
  const ops = await withVectors(
    core,
    changes.map((c) => opOf(req, c)),
    cost,
  );
  const answerOf = (results: readonly (Applied | null)[]): StoreResponse => {
    const res: StoreResponse = { memories: [], skipped: extraSkipped, conflicts: 0 };
    results.forEach((done, i) => {
      const kind = changes[i].kind;
      if (!done) return;
      if (kind === "ADD" || kind === "MERGE" || kind === "REPLACE") res.memories.push(toMemory(done.memory, kind));
      if (kind === "SKIP_DUPLICATE") res.skipped++;
      if (kind === "KEEP_EXISTING" || kind === "REPLACE") res.conflicts++;
    });
    return res;
  };
  const results = await core.storage.apply(ops, actorKeyId, undefined, idempotency?.record(answerOf));
  results.forEach((done, i) => {
    if (!done)
      core.logger.warn("dropped model operation", { decision: changes[i].kind, why: "target no longer current" });
  });
  observe?.(results.flatMap((done, i) => (done ? [{ kind: changes[i].kind, memory: done.memory }] : [])));
  return answerOf(results);
}
