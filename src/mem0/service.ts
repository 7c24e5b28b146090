/**
 * mem0's REST API over memd's own services: every write goes through the memory service and
 * `storage.apply` with the caller's key as actor, so it is an ordinary memd change (audit trail,
 * diff, event stream, the page). Nothing here sees the request context.
 *
 * How mem0's ids map to memd (docs/mem0.md says the same for users):
 * - the entity is `user_id` when given, else `agent:<agent_id>`, else `run:<run_id>`, else
 *   `app:<app_id>`;
 * - each of `agent_id`, `run_id` and `app_id` given is also a tag `agent:<id>`, `run:<id>`,
 *   `app:<id>`, so a filter on it is a tag filter of memd's list and search;
 * - reading back, `user_id` is the entity unless it has one of those prefixes, and the other ids
 *   come from the tags (or the entity's prefix). A memory stored through memd's own API in
 *   entity `alice` is mem0's `user_id: "alice"`.
 */
import { limits } from "../config/limits";
import type { Core } from "../core";
import { newCost, withVectors } from "../embedding/client";
import { checkScope } from "../keys/auth";
import type { KeyRecord } from "../keys/model";
import type { SmartStore } from "../memory/index";
import type { AppliedChange, StoreRequest as MemdStore, Memory } from "../memory/model";
import { checkStoreLimits, currentOf, deleteMemory, newMemory, patchMemory } from "../memory/service";
import { search as memdSearch } from "../search/service";
import type { EventRecord, MemoryRecord } from "../storage/records";
import type { MemoryOp } from "../storage/storage";
import { ApiError, invalidField } from "../wire/errors";
import { isoTime, observedAtField, parseIsoTime } from "../wire/time";
import type {
  AddRequest,
  Filters,
  ListRequest,
  Mem0Entity,
  Mem0History,
  Mem0Memory,
  Message,
  SearchRequest,
  UpdateRequest,
} from "./model";

/** The id kinds of mem0, in the order that picks the entity. */
export const idKinds = ["user_id", "agent_id", "run_id", "app_id"] as const;
type IdKind = (typeof idKinds)[number];
type Ids = Partial<Record<IdKind, string | null | undefined>>;
/** The prefix of the entity or tag that carries each id kind but the user's. */
const prefixOf: Record<Exclude<IdKind, "user_id">, string> = { agent_id: "agent:", run_id: "run:", app_id: "app:" };
const prefixed = Object.entries(prefixOf) as [Exclude<IdKind, "user_id">, string][];
/** The entity types /v1/entities/ answers, by id kind. */
const typeOf: Record<IdKind, string> = { user_id: "user", agent_id: "agent", run_id: "run", app_id: "app" };

/** The most memories a list or a delete by filters gathers (mem0's answers carry a total count). */
export const gatherMax = 10_000;
/** The largest top_k memd answers (its search's own limit). */
const topKMax = 100;

// ─── Namespace ────────────────────────────────────────────────────────────────

/**
 * The namespace a mem0 call lands in: the X-Memd-Namespace header; else the key's namespace
 * when it is scoped to exactly one (no pattern); else the MEMD_MEM0_NAMESPACE setting; else a
 * 400 naming the ways. The key must cover it (403 otherwise).
 */
export function namespaceOf(key: KeyRecord, header: string | null, setting: string | undefined): string {
  const single = key.namespaces.length === 1 && !key.namespaces[0]!.includes("*") ? key.namespaces[0] : undefined;
  const ns = header?.trim() || single || setting;
  if (!ns)
    throw new ApiError(
      "invalid_request",
      "which namespace? send the X-Memd-Namespace header, use a key scoped to exactly one namespace, or start memd with MEMD_MEM0_NAMESPACE (--mem0-namespace)",
    );
  if (ns.length > limits.nameChars || /\p{Cc}/u.test(ns))
    throw invalidField("X-Memd-Namespace", `must be 1 to ${limits.nameChars} characters without control characters`);
  checkScope(key, ns);
  return ns;
}

// ─── Ids ↔ entity and tags ────────────────────────────────────────────────────

function checkId(kind: IdKind, id: string) {
  const room = kind === "user_id" ? limits.nameChars : limits.tagChars - prefixOf[kind].length;
  // UTF-16 units, as memd's own schemas count a name's and a tag's length.
  if (id.trim() === "" || id.length > room || /\p{Cc}/u.test(id))
    throw invalidField(kind, `must be 1 to ${room} characters without control characters`);
  if (kind === "user_id" && prefixed.some(([, p]) => id.startsWith(p)))
    throw invalidField(kind, "may not start with agent:, run: or app: (memd keeps those for the other ids)");
}

/** The ids given (non-empty), checked. */
function givenIds(ids: Ids): Partial<Record<IdKind, string>> {
  const out: Partial<Record<IdKind, string>> = {};
  for (const kind of idKinds) {
    const v = ids[kind];
    if (v === undefined || v === null) continue;
    checkId(kind, v);
    out[kind] = v;
  }
  return out;
}

/** memd's entity and tags for the ids of an add. */
export function placeOf(ids: Ids): { entity: string; tags: string[] } {
  const given = givenIds(ids);
  const tags = prefixed.filter(([k]) => given[k] !== undefined).map(([k, p]) => p + given[k]);
  if (given.user_id !== undefined) return { entity: given.user_id, tags };
  const first = prefixed.find(([k]) => given[k] !== undefined);
  if (!first) throw invalidField("user_id", "one of user_id, agent_id, run_id or app_id is required");
  return { entity: first[1] + given[first[0]], tags };
}

/** mem0's ids of a memd memory. */
export function idsOf(r: Pick<MemoryRecord, "entity" | "tags">): Record<IdKind, string | null> {
  const ids: Record<IdKind, string | null> = { user_id: r.entity, agent_id: null, run_id: null, app_id: null };
  for (const [k, p] of prefixed) {
    if (r.entity.startsWith(p)) {
      ids.user_id = null;
      ids[k] = r.entity.slice(p.length);
    }
    const tag = r.tags?.find((t) => t.startsWith(p));
    if (tag !== undefined && ids[k] === null) ids[k] = tag.slice(p.length);
  }
  return ids;
}

const dateOf = (ms: number) => isoTime(ms).slice(0, 10);

/** A memory as memd's services answer it, back as a record (for toMem0 and the filters' test). */
const recordOf = (m: Memory): MemoryRecord => ({
  ...m,
  createdAt: Date.parse(m.createdAt),
  updatedAt: Date.parse(m.updatedAt ?? m.createdAt),
  expiresAt: m.expiresAt === undefined ? undefined : Date.parse(m.expiresAt),
  state: "current",
  observedAt: Date.parse(m.observedAt),
});

/** A memd memory as mem0 answers it. */
export function toMem0(r: MemoryRecord, extra: { score?: number; event?: string } = {}): Mem0Memory {
  const m: Mem0Memory = {
    id: r.id,
    memory: r.content,
    ...idsOf(r),
    metadata: r.metadata ?? null,
    categories: [r.category],
    created_at: isoTime(r.createdAt),
    updated_at: isoTime(r.updatedAt),
    expiration_date: r.expiresAt === undefined ? null : dateOf(r.expiresAt),
  };
  if (extra.score !== undefined) m.score = extra.score;
  if (extra.event !== undefined) m.event = extra.event;
  return m;
}

// ─── Filters ──────────────────────────────────────────────────────────────────

/** One memd read that can find matches: an entity and tags (none: the whole namespace). */
interface Plan {
  entity?: string;
  tags: string[];
}
/** A compiled filter: the reads that together find every match, and the test each match passes. */
interface Compiled {
  plans: Plan[];
  test: (r: MemoryRecord) => boolean;
  /** Whether every memory the plans find passes the test (no need to read more than asked). */
  exact: boolean;
}

const all: Compiled = { plans: [{ tags: [] }], test: () => true, exact: true };
const supported =
  "memd supports user_id, agent_id, run_id, app_id (a value, *, in, ne), created_at and updated_at (gt, gte, lt, lte), categories (a value, in, contains), metadata (key: value), with AND, OR and NOT";
const badFilter = (what: string) => invalidField("filters", `${what}; ${supported}`);

/** The most memd reads one mem0 call makes; a filter that would need more reads the namespace once. */
const maxPlans = 32;

function and(parts: Compiled[]): Compiled {
  if (parts.length === 0) return all;
  let plans: Plan[] = parts[0]!.plans;
  let exact = parts.every((p) => p.exact);
  for (const p of parts.slice(1)) {
    if (plans.length * p.plans.length > maxPlans) {
      // Too many combinations: the reads of one side cover the conjunction; the test does the rest.
      if (p.plans.length < plans.length) plans = p.plans;
      exact = false;
      continue;
    }
    const next: Plan[] = [];
    for (const a of plans)
      for (const b of p.plans) {
        if (a.entity !== undefined && b.entity !== undefined && a.entity !== b.entity) continue;
        next.push({ entity: a.entity ?? b.entity, tags: [...new Set([...a.tags, ...b.tags])] });
      }
    plans = next;
  }
  return { plans, test: (r) => parts.every((p) => p.test(r)), exact };
}

function or(parts: Compiled[]): Compiled {
  if (parts.length === 0) return { plans: [], test: () => false, exact: true };
  const plans = parts.flatMap((p) => p.plans);
  const wide = plans.length > maxPlans || plans.some((p) => p.entity === undefined && p.tags.length === 0);
  return {
    plans: wide ? [{ tags: [] }] : plans,
    test: (r) => parts.some((p) => p.test(r)),
    exact: !wide && parts.every((p) => p.exact),
  };
}

function idEquals(kind: IdKind, value: unknown): Compiled {
  if (typeof value !== "string") throw badFilter(`${kind} must be a string`);
  checkId(kind, value);
  const plan: Plan = kind === "user_id" ? { entity: value, tags: [] } : { tags: [prefixOf[kind] + value] };
  return { plans: [plan], test: (r) => idsOf(r)[kind] === value, exact: true };
}

/** A condition on one of the ids: a value, "*", or operators. */
function idCondition(kind: IdKind, value: unknown): Compiled {
  if (value === "*") return { plans: all.plans, test: (r) => idsOf(r)[kind] !== null, exact: false };
  if (typeof value === "string") return idEquals(kind, value);
  if (value === null || typeof value !== "object" || Array.isArray(value)) throw badFilter(`${kind} has a bad value`);
  const parts: Compiled[] = [];
  for (const [op, arg] of Object.entries(value)) {
    if (op === "eq") parts.push(idEquals(kind, arg));
    else if (op === "in") {
      if (!Array.isArray(arg)) throw badFilter(`${kind}.in must be a list`);
      parts.push(or(arg.map((v) => idEquals(kind, v))));
    } else if (op === "ne") {
      if (typeof arg !== "string") throw badFilter(`${kind}.ne must be a string`);
      parts.push({ plans: all.plans, test: (r) => idsOf(r)[kind] !== arg, exact: false });
    } else throw badFilter(`${kind} does not take "${op}"`);
  }
  return and(parts);
}

function timeCondition(field: "created_at" | "updated_at", value: unknown): Compiled {
  const at = (r: MemoryRecord) => (field === "created_at" ? r.createdAt : r.updatedAt);
  const ms = (v: unknown) => {
    const t = typeof v === "string" ? (parseIsoTime(v) ?? Date.parse(v)) : Number.NaN;
    if (!Number.isFinite(t)) throw badFilter(`${field} needs ISO 8601 times, e.g. 2026-01-31`);
    return t;
  };
  if (value === null || typeof value !== "object" || Array.isArray(value))
    throw badFilter(`${field} takes gt, gte, lt or lte`);
  const tests: ((r: MemoryRecord) => boolean)[] = [];
  for (const [op, arg] of Object.entries(value)) {
    const t = ms(arg);
    if (op === "gt") tests.push((r) => at(r) > t);
    else if (op === "gte") tests.push((r) => at(r) >= t);
    else if (op === "lt") tests.push((r) => at(r) < t);
    else if (op === "lte") tests.push((r) => at(r) <= t);
    else throw badFilter(`${field} does not take "${op}"`);
  }
  return { plans: all.plans, test: (r) => tests.every((f) => f(r)), exact: false };
}

function categoryCondition(value: unknown): Compiled {
  const lower = (s: unknown) => {
    if (typeof s !== "string") throw badFilter("categories takes strings");
    return s.toLowerCase();
  };
  let test: (r: MemoryRecord) => boolean;
  if (typeof value === "string") test = (r) => r.category.toLowerCase() === lower(value);
  else if (value && typeof value === "object" && !Array.isArray(value)) {
    const tests = Object.entries(value).map(([op, arg]): ((r: MemoryRecord) => boolean) => {
      if (op === "in" && Array.isArray(arg)) {
        const set = new Set(arg.map(lower));
        return (r) => set.has(r.category.toLowerCase());
      }
      if (op === "contains" || op === "icontains") {
        const part = lower(arg);
        return (r) => r.category.toLowerCase().includes(part);
      }
      throw badFilter(`categories does not take "${op}"`);
    });
    test = (r) => tests.every((f) => f(r));
  } else throw badFilter("categories has a bad value");
  return { plans: all.plans, test, exact: false };
}

function metadataCondition(value: unknown): Compiled {
  if (value === null || typeof value !== "object" || Array.isArray(value))
    throw badFilter("metadata takes an object of key: value");
  const pairs = Object.entries(value);
  return {
    plans: all.plans,
    test: (r) => pairs.every(([k, v]) => Bun.deepEquals(r.metadata?.[k], v)),
    exact: false,
  };
}

function list(op: string, value: unknown): unknown[] {
  if (Array.isArray(value)) return value;
  if (value && typeof value === "object") return [value];
  throw badFilter(`${op} takes a list of filters`);
}

/** Compiles mem0's filters (an object: its keys are ANDed) to memd reads and a test. */
export function compileFilters(filters: unknown, depth = 0): Compiled {
  if (depth > 16) throw badFilter("filters nest too deep");
  if (filters === null || typeof filters !== "object" || Array.isArray(filters))
    throw badFilter("each filter must be an object");
  const parts: Compiled[] = [];
  for (const [key, value] of Object.entries(filters)) {
    if (key === "AND") parts.push(and(list(key, value).map((f) => compileFilters(f, depth + 1))));
    else if (key === "OR") parts.push(or(list(key, value).map((f) => compileFilters(f, depth + 1))));
    else if (key === "NOT") {
      const inner = and(list(key, value).map((f) => compileFilters(f, depth + 1)));
      parts.push({ plans: all.plans, test: (r) => !inner.test(r), exact: false });
    } else if ((idKinds as readonly string[]).includes(key)) parts.push(idCondition(key as IdKind, value));
    else if (key === "created_at" || key === "updated_at") parts.push(timeCondition(key, value));
    else if (key === "categories") parts.push(categoryCondition(value));
    else if (key === "metadata") parts.push(metadataCondition(value));
    else throw badFilter(`"${key}" is not a filter memd knows`);
  }
  return and(parts);
}

/**
 * The filters of a read with the fields beside them that also narrow it: top-level ids (older
 * clients send those), `metadata` and `categories` (search), `start_date` and `end_date` (get all).
 */
function filtersOf(body: { filters?: Filters | null } & Ids & Record<string, unknown>): Compiled {
  const parts = [compileFilters(body.filters ?? {})];
  for (const kind of idKinds) {
    const v = body[kind];
    if (typeof v === "string") parts.push(idEquals(kind, v));
  }
  if (body.metadata != null) parts.push(metadataCondition(body.metadata));
  if (body.categories != null) {
    if (!Array.isArray(body.categories)) throw invalidField("categories", "must be a list of categories");
    parts.push(categoryCondition({ in: body.categories }));
  }
  const range: Record<string, unknown> = {};
  if (body.start_date != null) range.gte = body.start_date;
  if (body.end_date != null) range.lte = body.end_date;
  if (Object.keys(range).length) parts.push(timeCondition("created_at", range));
  return and(parts);
}

/** Query parameters of GET and DELETE /v1/memories/ that memd reads, or may ignore (org_id, project_id: mem0's account). */
const queryKnown = new Set<string>([...idKinds, "org_id", "project_id"]);

/** Refuses a query parameter memd would otherwise ignore: a filter left out widens a read, or a delete. */
function onlyKnown(query: Record<string, unknown>, also: string[]) {
  for (const name of Object.keys(query))
    if (!queryKnown.has(name) && !also.includes(name))
      throw invalidField(
        name,
        `is not a parameter memd reads here; it takes ${[...idKinds, ...also].join(", ")} (use POST /v3/memories/ for other filters)`,
      );
}

// ─── Reads ────────────────────────────────────────────────────────────────────

/** Every current memory the filter matches, newest first; at most gatherMax (400 beyond). */
async function gather(core: Core, namespace: string, c: Compiled): Promise<MemoryRecord[]> {
  const seen = new Map<string, MemoryRecord>();
  for (const plan of c.plans) {
    const query = { namespace, entity: plan.entity, tags: plan.tags.length ? plan.tags : undefined };
    let before: string | undefined;
    let read = 0;
    do {
      const page = await core.storage.listMemories({ ...query, limit: limits.pageMax, before });
      for (const r of page.memories) if (c.test(r)) seen.set(r.id, r);
      read += page.memories.length;
      if (seen.size > gatherMax || read > gatherMax * 4)
        throw new ApiError(
          "invalid_request",
          `more than ${gatherMax} memories to go through; narrow the filters, or page with memd's GET /v1/memory`,
        );
      before = page.next;
    } while (before !== undefined);
  }
  // UUIDv7 ids grow with time: the greatest id is the newest memory.
  return [...seen.values()].sort((a, b) => (a.id < b.id ? 1 : a.id > b.id ? -1 : 0));
}

/** A page of a list in mem0's envelope; `url` is the request's, to build next and previous. */
function paginate<T>(items: T[], page: number, pageSize: number, url: URL) {
  const at = (n: number) => {
    const u = new URL(url);
    u.searchParams.set("page", String(n));
    u.searchParams.set("page_size", String(pageSize));
    return u.href;
  };
  const start = (page - 1) * pageSize;
  return {
    count: items.length,
    next: start + pageSize < items.length ? at(page + 1) : null,
    previous: page > 1 ? at(page - 1) : null,
    results: items.slice(start, start + pageSize),
  };
}

/** Paging of a list call: body first (mem0's v2), then the query (the clients' v3); default one page of 100. */
function pagingOf(body: { page?: number | null; page_size?: number | null }, query: Record<string, unknown>) {
  const num = (v: unknown) => (typeof v === "string" ? Number(v) : typeof v === "number" ? v : undefined);
  const page = num(query.page) ?? body.page ?? 1;
  const pageSize = num(query.page_size) ?? body.page_size ?? limits.listDefault;
  if (pageSize > limits.pageMax) throw invalidField("page_size", `must be 1 to ${limits.pageMax}`);
  return { page, pageSize };
}

/** POST /v2|v3/memories/: the memories the filters match, a page at a time. */
export async function listMem0(
  core: Core,
  namespace: string,
  body: ListRequest,
  query: Record<string, unknown>,
  url: URL,
) {
  const { page, pageSize } = pagingOf(body, query);
  const found = await gather(core, namespace, filtersOf(body));
  return paginate(
    found.map((r) => toMem0(r)),
    page,
    pageSize,
    url,
  );
}

/** GET /v1/memories/: a list without page and page_size (both) is a plain array, as mem0's. */
export async function listByIds(core: Core, namespace: string, query: Record<string, unknown>, url: URL) {
  onlyKnown(query, ["page", "page_size", "start_date", "end_date", "fields"]);
  const found = await gather(core, namespace, filtersOf(query as Ids));
  const results = found.map((r) => toMem0(r));
  if (query.page === undefined || query.page_size === undefined) return results;
  const { page, pageSize } = pagingOf({}, query);
  return paginate(results, page, pageSize, url);
}

/** The answer of an add or a search: `{results}`, or the bare list of mem0's old output_format v1.0. */
const inFormat = (body: { output_format?: unknown }, results: Mem0Memory[]) =>
  body.output_format === "v1.0" ? results : { results };

/** POST /v1|v2|v3/memories/search/: memd's search per read of the filters, merged by score. */
export async function searchMem0(core: Core, namespace: string, body: SearchRequest) {
  const c = filtersOf(body);
  const topK = Math.min(body.top_k ?? body.limit ?? 10, topKMax);
  // An inexact filter is tested after the search: read as many as memd answers, to keep top_k.
  const limit = c.exact ? topK : topKMax;
  const best = new Map<string, { r: Mem0Memory; score: number }>();
  for (const plan of c.plans) {
    const res = await memdSearch(
      core,
      {
        namespace,
        entity: plan.entity,
        tags: plan.tags.length ? plan.tags : undefined,
        query: body.query,
        limit,
        mode: body.keyword_search === true ? "keyword" : undefined,
      },
      newCost(),
    );
    for (const hit of res.results) {
      const record = recordOf(hit);
      if (!c.test(record)) continue;
      if (body.threshold != null && hit.score < body.threshold) continue;
      const had = best.get(hit.id);
      if (!had || had.score < hit.score)
        best.set(hit.id, { r: toMem0(record, { score: hit.score }), score: hit.score });
    }
  }
  const results = [...best.values()].sort((a, b) => b.score - a.score).slice(0, topK);
  return inFormat(
    body,
    results.map((x) => x.r),
  );
}

/**
 * The routes by id get the memory as the key may see it (their `memory: "params.id"`,
 * keys/auth.ts visibleMemory: undefined for an unknown id or one outside the key's namespaces, so
 * ids cannot be probed).
 */
type Seen = MemoryRecord | undefined;

/** The memory if it is current, else 404. */
function current(memory: Seen): MemoryRecord {
  const r = currentOf(memory);
  if (!r) throw new ApiError("not_found", "no memory with that id");
  return r;
}

export const getMem0 = (memory: Seen) => toMem0(current(memory));

/** mem0's event for a memd event: UPDATE for any change of content, NONE for a store that changed nothing. */
const mem0Event = (e: EventRecord["event"]) =>
  e === "ADD" ? "ADD" : e === "DELETE" ? "DELETE" : e === "SKIP_DUPLICATE" || e === "KEEP_EXISTING" ? "NONE" : "UPDATE";

/** GET /v1/memories/{id}/history/: the memory's audit events, oldest first. Works for deleted memories too. */
export async function historyMem0(core: Core, r: Seen): Promise<Mem0History[]> {
  if (!r) throw new ApiError("not_found", "no memory with that id");
  const events = await core.storage.newestEvents({ namespace: r.namespace, memoryId: r.id }, limits.pageMax);
  const user = idsOf(r).user_id;
  return events.reverse().map((e) => ({
    id: `${e.namespace}:${e.seq}`,
    memory_id: e.memoryId,
    input: [],
    old_memory: e.oldContent,
    new_memory: e.newContent,
    user_id: user,
    categories: [e.category],
    event: mem0Event(e.event),
    created_at: isoTime(e.atMs),
    updated_at: isoTime(e.atMs),
    memd_event: e.event,
    reason: e.reason,
    actor_key_id: e.actorKeyId,
  }));
}

// ─── Writes ───────────────────────────────────────────────────────────────────

/** The text of a message (mem0 allows a content object such as {type: "text", text}). */
function textOf(m: Message): string {
  if (typeof m.content === "string") return m.content;
  const text = (m.content as { text?: unknown } | null)?.text;
  return typeof text === "string" ? text : "";
}

/** The messages of an add, system messages left out (mem0 does not store them either). */
function messagesOf(body: AddRequest): Message[] {
  const raw = typeof body.messages === "string" ? [{ role: "user", content: body.messages }] : body.messages;
  const list = (Array.isArray(raw) ? raw : [raw]).filter((m) => m.role !== "system" && textOf(m).trim() !== "");
  if (list.length === 0) throw invalidField("messages", "holds no user or assistant message with text");
  return list;
}

const maxTtlMs = 100 * 365 * 86_400_000;

/** Runs `fn`, naming mem0's field where memd's service names its own (`content` is mem0's `messages` or `text`). */
async function naming<T>(from: string, to: string, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (e) {
    const [only, more] = e instanceof ApiError ? (e.details ?? []) : [];
    if (only && !more && only.field === from) throw invalidField(to, only.message);
    throw e;
  }
}

/** Seconds from now to the end (UTC) of mem0's expiration_date, for memd's ttl. */
function ttlOf(date: string | null | undefined, now = Date.now()): number | undefined {
  if (date == null) return undefined;
  const day = /^\d{4}-\d{2}-\d{2}$/.test(date) ? parseIsoTime(date) : undefined;
  if (day === undefined) throw invalidField("expiration_date", "must be a date as YYYY-MM-DD");
  // Visible through that day (UTC), as mem0's. memd counts the ttl from the write, a little after
  // now: a second's margin keeps the expiry within the day.
  const end = day + 86_400_000 - 1000;
  if (end <= now) throw invalidField("expiration_date", "is in the past");
  if (end - now > maxTtlMs) throw invalidField("expiration_date", "is more than 100 years away");
  return (end - now) / 1000;
}

/**
 * POST /v1/memories/ and /v3/memories/add/. infer (default true): memd's smart store over the
 * conversation (one `role: text` line per message when several roles speak); false: each
 * message stored verbatim, all in one transaction.
 */
export async function addMem0(
  core: Core,
  smartStore: SmartStore,
  key: KeyRecord,
  namespace: string,
  body: AddRequest,
  set: { headers: Record<string, unknown> },
) {
  // The Python client's AddMemoryOptions carries the ids in `filters`; the body's own win.
  const filters = (body.filters ?? {}) as Ids;
  const ids: Ids = {};
  for (const kind of idKinds) {
    const v = body[kind] ?? (typeof filters[kind] === "string" ? filters[kind] : undefined);
    if (v != null) ids[kind] = v;
  }
  const { entity, tags } = placeOf(ids);
  const messages = messagesOf(body);
  const base: Omit<MemdStore, "content"> = { namespace, entity };
  if (tags.length) base.tags = tags;
  if (body.metadata) base.metadata = body.metadata;
  const ttl = ttlOf(body.expiration_date);
  if (ttl !== undefined) base.ttl = ttl;
  const observedAt = observedAtOf(body.timestamp);
  if (observedAt !== undefined) base.observedAt = observedAt;
  if (body.infer === false) {
    const requests = messages.map((m) => ({ ...base, content: textOf(m) }));
    await naming("content", "messages", async () => {
      for (const req of requests) checkStoreLimits(core, req);
    });
    const ops: MemoryOp[] = requests.map((req) => ({ event: "ADD", create: newMemory(req, { content: req.content }) }));
    const done = await core.storage.apply(await withVectors(core, ops, newCost()), key.id);
    return inFormat(
      body,
      done.flatMap((d) => (d ? [toMem0(d.memory, { event: "ADD" })] : [])),
    );
  }
  const roles = new Set(messages.map((m) => m.role));
  const content =
    roles.size > 1 ? messages.map((m) => `${m.role}: ${textOf(m)}`).join("\n") : messages.map(textOf).join("\n");
  let applied: AppliedChange[] = [];
  await naming("content", "messages", () =>
    smartStore({ ...base, content, infer: true }, key.id, set, undefined, (a) => {
      applied = a;
    }),
  );
  // Each change as written, in mem0's words: MERGE changed a memory in place and REPLACE put a new
  // memory in the place of a contradicted one (UPDATE); DELETE answers the memory it deleted; a
  // duplicate skipped or an existing memory kept answers that memory (NONE).
  return inFormat(
    body,
    applied.map(({ kind, memory }) => toMem0(memory, { event: mem0AddEvent[kind] })),
  );
}

/**
 * mem0's own date of a memory, `timestamp` (Unix time in seconds, as its clients send it; a
 * numeric string or ISO 8601 too), as memd's observedAt (ISO 8601): when the fact was said. The
 * same bounds as observedAt (not before 1970, not in the future), named `timestamp` in a 400.
 */
function observedAtOf(value: unknown): string | undefined {
  if (value == null) return undefined;
  const ms =
    typeof value === "number" || (typeof value === "string" && /^\d+(\.\d+)?$/.test(value))
      ? Math.round(Number(value) * 1000)
      : typeof value === "string"
        ? parseIsoTime(value)
        : undefined;
  if (ms === undefined || !Number.isFinite(ms))
    throw invalidField("timestamp", "must be a Unix time in seconds or an ISO 8601 timestamp");
  const at = isoTime(ms);
  observedAtField(at, Date.now(), "timestamp");
  return at;
}

const mem0AddEvent: Record<AppliedChange["kind"], string> = {
  ADD: "ADD",
  MERGE: "UPDATE",
  REPLACE: "UPDATE",
  DELETE: "DELETE",
  SKIP_DUPLICATE: "NONE",
  KEEP_EXISTING: "NONE",
};

/** PUT /v1/memories/{id}/: text and metadata (replaced whole); a body that changes nothing answers the memory. */
export async function updateMem0(core: Core, key: KeyRecord, id: string, memory: Seen, body: UpdateRequest) {
  const existing = current(memory);
  const patch: { content?: string; metadata?: Record<string, unknown>; observedAt?: string } = {};
  if (typeof body.text === "string" && body.text !== existing.content) {
    if (body.text.trim() === "") throw invalidField("text", "must not be blank");
    patch.content = body.text;
  }
  if (body.metadata != null && !Bun.deepEquals(body.metadata, existing.metadata ?? null, true))
    patch.metadata = body.metadata;
  const observedAt = observedAtOf(body.timestamp);
  if (observedAt !== undefined && parseIsoTime(observedAt) !== existing.observedAt) patch.observedAt = observedAt;
  if (Object.keys(patch).length === 0) return toMem0(existing);
  const m = await naming("content", "text", () => patchMemory(core, id, patch, key.id, existing));
  return toMem0(recordOf(m));
}

/** DELETE /v1/memories/{id}/. */
export async function deleteMem0(core: Core, key: KeyRecord, id: string, memory: Seen) {
  await deleteMemory(core, id, key.id, memory);
  return { message: "Memory deleted successfully!" };
}

/** DELETE /v1/memories/?user_id=…: every current memory of the ids given (at least one), one transaction. */
export async function deleteAllMem0(core: Core, key: KeyRecord, namespace: string, ids: Ids & Record<string, unknown>) {
  onlyKnown(ids, []);
  const given = givenIds(ids);
  if (Object.keys(given).length === 0)
    throw invalidField("user_id", "one of user_id, agent_id, run_id or app_id is required to delete memories");
  const found = await gather(core, namespace, and(Object.entries(given).map(([k, v]) => idEquals(k as IdKind, v))));
  const ops: MemoryOp[] = found.map((r) => ({ event: "DELETE", target: r.id, reason: "deleted" }));
  const done = ops.length ? await core.storage.apply(ops, key.id) : [];
  return { message: "Memories deleted successfully!", deleted: done.filter(Boolean).length };
}

/** DELETE /v2/entities/{type}/{name}/ (the clients' delete_users): the memories of one id. */
export function deleteEntityMem0(core: Core, key: KeyRecord, namespace: string, type: string, name: string) {
  const kind = idKinds.find((k) => typeOf[k] === type);
  if (!kind) throw new ApiError("not_found", `no entity type "${type}"; the types are user, agent, run and app`);
  return deleteAllMem0(core, key, namespace, { [kind]: name } as Ids);
}

/** GET /v1/entities/: the namespace's entities that hold memories, with their counts. */
export async function entitiesMem0(core: Core, namespace: string, query: Record<string, unknown>, url: URL) {
  const found: Mem0Entity[] = [];
  let after: string | undefined;
  for (;;) {
    const page = await core.storage.entities(namespace, { after, limit: limits.pageMax });
    for (const e of page) {
      if (e.memories === 0) continue;
      const ids = idsOf({ entity: e.entity });
      const kind = idKinds.find((k) => ids[k] !== null) ?? "user_id";
      found.push({
        id: e.entity,
        name: ids[kind]!,
        type: typeOf[kind],
        total_memories: e.memories,
        created_at: isoTime(e.lastEventAtMs),
        updated_at: isoTime(e.lastEventAtMs),
        owner: null,
        metadata: null,
      });
    }
    if (page.length < limits.pageMax || found.length > gatherMax) break;
    after = page.at(-1)!.entity;
  }
  const { page, pageSize } = pagingOf({}, { page: query.page, page_size: query.page_size ?? String(limits.pageMax) });
  return paginate(found, page, pageSize, url);
}

/**
 * GET /v1/ping/: what the clients check, with what memd knows of the call. The Python client
 * will not start without an org_id and a project_id (its project manager checks both); memd has
 * neither, and answers "memd" for each (the project and webhook routes they lead to are not
 * served).
 */
export function pingMem0(key: KeyRecord, namespace: string | undefined) {
  return {
    status: "ok",
    org_id: "memd",
    project_id: "memd",
    user_email: null,
    key_id: key.id,
    namespace: namespace ?? null,
  };
}

/** An error as the mem0 clients read it: `detail` is the message (Python), the whole body the text (TypeScript). */
export const mem0ErrorBody = (e: ApiError) => ({
  detail: e.message,
  code: e.code,
  ...(e.details ? { details: e.details } : {}),
});

/** Paths of mem0's API that memd answers (their errors take mem0's shape). */
export const isMem0Path = (path: string) =>
  /^\/v1\/(ping|memories|entities|batch|event|exports|feedback|summary)\/|^\/v[23]\/(memories|entities|profiles)\/|^\/api\/v1\//.test(
    path,
  );
