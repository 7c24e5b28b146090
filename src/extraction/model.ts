// The shape of the model's answer: one list of operations that decides
// extraction and reconciliation together. Kept flat, with few required keys,
// because small local models drop keys and struggle with nested unions; the
// reconcile step checks what the decision needs (a target for MERGE, ...).
import { Type } from "@sinclair/typebox";
import type { EventKind } from "../audit/model";

/**
 * The model decides with the interface's six audit event kinds (UPDATE, an edit by a person,
 * is not a model decision).
 */
export const Decisions = [
  "ADD",
  "SKIP_DUPLICATE",
  "MERGE",
  "REPLACE",
  "KEEP_EXISTING",
  "DELETE",
] as const satisfies readonly EventKind[];

export const Decision = Type.Union(
  Decisions.map((d) => Type.Literal(d)),
  { description: "what to do with the fact" },
);
export type Decision = typeof Decision.static;

/**
 * What a category that is not a string (a number, an object) becomes when an answer is read:
 * the operation is then dropped alone (reconcile.ts), instead of failing the whole answer.
 */
export const NOT_A_CATEGORY = "\u0000not a string";

export const Operation = Type.Object({
  fact: Type.String({ description: "one short, self-contained fact" }),
  decision: Decision,
  target: Type.Optional(Type.String({ description: 'handle of the existing memory concerned, e.g. "m3"' })),
  category: Type.Optional(Type.String({ description: "one lowercase word, e.g. preference", default: "fact" })),
  importance: Type.Optional(Type.Number({ minimum: 0, maximum: 1, default: 0.5 })),
  mergedContent: Type.Optional(Type.String({ description: "for MERGE: the target's new full content" })),
  reason: Type.Optional(Type.String({ description: "why, e.g. contradiction" })),
});
export type Operation = typeof Operation.static;

export const ModelAnswer = Type.Object({ operations: Type.Array(Operation) });
export type ModelAnswer = typeof ModelAnswer.static;

/** An existing memory as the model sees it: a short local handle instead of its id. */
export const Candidate = Type.Object({
  handle: Type.String(),
  content: Type.String(),
  category: Type.String(),
});
export type Candidate = typeof Candidate.static;
