/**
 * The request shapes of mem0's REST API as its official clients send them (mem0ai on npm,
 * mem0ai on PyPI). Fields memd has no counterpart for are accepted and ignored, so every object
 * here allows additional properties; what memd reads is typed. The list of ignored fields is in
 * docs/mem0.md.
 */
import { t } from "elysia";

/** The header that names the namespace of a mem0 call (see namespaceOf in service.ts). */
export const namespaceHeader = "x-memd-namespace";

const Id = t.String({ minLength: 1, description: "a mem0 id; see docs/mem0.md for how it maps to memd's entity" });
const OptionalId = t.Optional(t.Nullable(Id));

/** The ids of a mem0 call: who the memories are about. */
export const EntityIds = { user_id: OptionalId, agent_id: OptionalId, run_id: OptionalId, app_id: OptionalId };

export const Message = t.Object(
  { role: t.String(), content: t.Union([t.String(), t.Null(), t.Record(t.String(), t.Unknown())]) },
  { additionalProperties: true },
);
export type Message = typeof Message.static;

export const AddRequest = t.Object(
  {
    messages: t.Union([t.String({ minLength: 1 }), Message, t.Array(Message, { minItems: 1 })]),
    ...EntityIds,
    metadata: t.Optional(t.Nullable(t.Record(t.String(), t.Unknown()))),
    infer: t.Optional(t.Nullable(t.Boolean())),
    expiration_date: t.Optional(t.Nullable(t.String())),
    timestamp: t.Optional(
      t.Nullable(
        t.Union([t.Number(), t.String()], {
          description: "when the messages were said: Unix time in seconds (or ISO 8601); memd's observedAt",
        }),
      ),
    ),
    filters: t.Optional(t.Nullable(t.Record(t.String(), t.Unknown()))),
    output_format: t.Optional(t.Nullable(t.String())),
  },
  { additionalProperties: true },
);
export type AddRequest = typeof AddRequest.static;

/** mem0's filters: `{user_id: "a"}`, `{AND: [...]}`, `{OR: [...]}`, `{NOT: [...]}`, operators per field. */
export const Filters = t.Record(t.String(), t.Unknown());
export type Filters = typeof Filters.static;

export const SearchRequest = t.Object(
  {
    query: t.String({ minLength: 1, pattern: "\\S" }),
    filters: t.Optional(t.Nullable(Filters)),
    ...EntityIds,
    top_k: t.Optional(t.Nullable(t.Integer({ minimum: 1 }))),
    limit: t.Optional(t.Nullable(t.Integer({ minimum: 1 }))),
    threshold: t.Optional(t.Nullable(t.Number())),
    keyword_search: t.Optional(t.Nullable(t.Boolean())),
    output_format: t.Optional(t.Nullable(t.String())),
  },
  { additionalProperties: true },
);
export type SearchRequest = typeof SearchRequest.static;

const PageText = t.String({ pattern: "^[1-9][0-9]{0,6}$", description: "a whole number from 1" });

/** `page` and `page_size` as query text (the clients put them on the URL). */
export const PageQuery = t.Object(
  { page: t.Optional(PageText), page_size: t.Optional(PageText) },
  { additionalProperties: true },
);

export const ListRequest = t.Object(
  {
    filters: t.Optional(t.Nullable(Filters)),
    ...EntityIds,
    page: t.Optional(t.Nullable(t.Integer({ minimum: 1 }))),
    page_size: t.Optional(t.Nullable(t.Integer({ minimum: 1 }))),
  },
  { additionalProperties: true },
);
export type ListRequest = typeof ListRequest.static;

/** Query of GET and DELETE /v1/memories/: the ids, paging, and fields memd ignores. */
export const EntityQuery = t.Object(
  {
    user_id: t.Optional(Id),
    agent_id: t.Optional(Id),
    run_id: t.Optional(Id),
    app_id: t.Optional(Id),
    page: t.Optional(PageText),
    page_size: t.Optional(PageText),
  },
  { additionalProperties: true },
);
export type EntityQuery = typeof EntityQuery.static;

export const UpdateRequest = t.Object(
  {
    text: t.Optional(t.Nullable(t.String())),
    metadata: t.Optional(t.Nullable(t.Record(t.String(), t.Unknown()))),
    timestamp: t.Optional(
      t.Nullable(
        t.Union([t.Number(), t.String()], { description: "Unix time in seconds (or ISO 8601); memd's observedAt" }),
      ),
    ),
  },
  { additionalProperties: true },
);
export type UpdateRequest = typeof UpdateRequest.static;

/** Any string: an id that is not a UUID answers 404, as memd's own routes do. */
export const MemoryParams = t.Object({ id: t.String() });

/** A memory as mem0 answers it; `score` in search results, `event` in add results. */
export const Mem0Memory = t.Object({
  id: t.String(),
  memory: t.String(),
  user_id: t.Nullable(t.String()),
  agent_id: t.Nullable(t.String()),
  run_id: t.Nullable(t.String()),
  app_id: t.Nullable(t.String()),
  metadata: t.Nullable(t.Record(t.String(), t.Unknown())),
  categories: t.Array(t.String()),
  created_at: t.String(),
  updated_at: t.String(),
  expiration_date: t.Nullable(t.String()),
  score: t.Optional(t.Number()),
  event: t.Optional(t.String()),
});
export type Mem0Memory = typeof Mem0Memory.static;

export const Mem0History = t.Object({
  id: t.String(),
  memory_id: t.String(),
  input: t.Array(t.Unknown()),
  old_memory: t.Nullable(t.String()),
  new_memory: t.Nullable(t.String()),
  user_id: t.Nullable(t.String()),
  categories: t.Array(t.String()),
  event: t.String(),
  created_at: t.String(),
  updated_at: t.String(),
  memd_event: t.String(),
  reason: t.Nullable(t.String()),
  actor_key_id: t.Nullable(t.String()),
});
export type Mem0History = typeof Mem0History.static;

export const Mem0Entity = t.Object({
  id: t.String(),
  name: t.String(),
  type: t.String(),
  total_memories: t.Integer(),
  created_at: t.String(),
  updated_at: t.String(),
  owner: t.Nullable(t.String()),
  metadata: t.Nullable(t.Record(t.String(), t.Unknown())),
});
export type Mem0Entity = typeof Mem0Entity.static;

export const Paginated = (item: ReturnType<typeof t.Object>) =>
  t.Object({
    count: t.Integer(),
    next: t.Nullable(t.String()),
    previous: t.Nullable(t.String()),
    results: t.Array(item),
  });
