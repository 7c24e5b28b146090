import { t } from "elysia";
import { AuditEvent } from "../audit/model";
import { Memory } from "../memory/model";
import { Name } from "../wire/schemas";

export const ConsolidateRequest = t.Object(
  {
    namespace: Name,
    entity: Name,
    dryRun: t.Optional(t.Boolean({ description: "answer the groups and what would be kept, and write nothing" })),
  },
  { additionalProperties: false },
);
export type ConsolidateRequest = typeof ConsolidateRequest.static;

export const ConsolidatedGroup = t.Object({
  kept: Memory,
  merged: t.Array(Memory, { description: "the memories merged into `kept` and deleted (events DELETE naming it)" }),
  by: t.Union([t.Literal("rules"), t.Literal("model")], {
    description:
      "rules: the same words (docs/undo.md); model: the configured model judged them one fact and gave the text",
  }),
  reason: t.String(),
});
export type ConsolidatedGroup = typeof ConsolidatedGroup.static;

export const ConsolidateResponse = t.Object({
  namespace: t.String(),
  entity: t.String(),
  dryRun: t.Boolean(),
  groups: t.Array(ConsolidatedGroup, { description: "kept: as the merge leaves it (dry run: as it would)" }),
  memoriesMerged: t.Integer({ minimum: 0, description: "memories merged into others and deleted" }),
  tookMs: t.Number({ minimum: 0 }),
  events: t.Array(AuditEvent, { description: "the events written, in order; empty on a dry run" }),
});
export type ConsolidateResponse = typeof ConsolidateResponse.static;
