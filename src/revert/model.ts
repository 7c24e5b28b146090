import { t } from "elysia";
import { AuditEvent } from "../audit/model";
import { AsOf, Memory } from "../memory/model";
import { Name } from "../wire/schemas";

export const RevertRequest = t.Object(
  {
    toEvent: t.String({
      minLength: 1,
      maxLength: 20,
      description: "the id of one of the memory's events, as GET /v1/memory/events shows it",
    }),
    dryRun: t.Optional(t.Boolean({ description: "answer what would change and write nothing" })),
  },
  { additionalProperties: false },
);
export type RevertRequest = typeof RevertRequest.static;

/** What a revert or restore does to one memory: the kind of event it writes, or nothing. */
export const revertActions = ["add", "update", "delete", "unchanged"] as const;
const Action = t.Union(
  revertActions.map((a) => t.Literal(a)),
  {
    description:
      "add: brought back (event ADD, same id); update: changed (UPDATE); delete: removed (DELETE); unchanged: already so, nothing written",
  },
);

export const RevertResponse = t.Object({
  memoryId: t.String(),
  toEvent: t.String(),
  dryRun: t.Boolean(),
  action: Action,
  fields: t.Array(t.String(), { description: "the fields that change (content, state, tags, ...)" }),
  before: t.Nullable(Memory, { description: "the memory as it is current now; null when it is not" }),
  after: t.Nullable(Memory, { description: "the memory after the revert; null when it is deleted by it" }),
  event: t.Nullable(AuditEvent, { description: "the event written; null on a dry run or when nothing changed" }),
});
export type RevertResponse = typeof RevertResponse.static;

export const RestoreRequest = t.Object(
  {
    namespace: Name,
    entity: Name,
    asOf: AsOf,
    dryRun: t.Optional(t.Boolean({ description: "answer what would change and write nothing" })),
  },
  { additionalProperties: false },
);
export type RestoreRequest = typeof RestoreRequest.static;

export const RestoredMemory = t.Object({
  id: t.String(),
  action: t.Union(
    [...revertActions, "erased" as const].map((a) => t.Literal(a)),
    {
      description: "as a revert's, or erased: current at asOf but erased since, so it cannot come back",
    },
  ),
  fields: t.Array(t.String()),
  before: t.Nullable(Memory),
  after: t.Nullable(Memory),
});

export const RestoreResponse = t.Object({
  namespace: t.String(),
  entity: t.String(),
  asOf: t.String(),
  dryRun: t.Boolean(),
  /** Memories added, updated or deleted (the events written, or that a dry run would write). */
  changed: t.Integer({ minimum: 0 }),
  memories: t.Array(RestoredMemory, {
    description: "every memory current now or at asOf, newest first, and what was done to it",
  }),
  events: t.Array(AuditEvent, { description: "the events written, in order; empty on a dry run" }),
});
export type RestoreResponse = typeof RestoreResponse.static;
export type RestoredMemory = typeof RestoredMemory.static;
