// @memd/client/langgraph: a LangGraph long-term memory store (`BaseStore`) kept in memd, so that
// every put of an agent built with LangGraph is a change in memd's audit trail (diff, the change
// stream, the page at /ui, as-of reads, reverts). `@langchain/langgraph-checkpoint` is an optional
// peer dependency: only this entry point imports it.
//
//   const store = new MemdStore(client, { namespace: "my-agent" });
//   const graph = builder.compile({ store });
//
// The mapping (docs/agents.md, "LangGraph"): the store lives in one memd namespace; an item's
// namespace tuple is the memory's entity, its labels joined by "." (LangGraph's labels never hold a
// "."); its key is a keyed fact's key; its value is the memory's metadata, kept exactly; the
// memory's content is the text of the value's indexed fields, which memd's search ranks.
import {
  BaseStore,
  type GetOperation,
  type Item,
  type ListNamespacesOperation,
  type MatchCondition,
  type Operation,
  type OperationResults,
  type PutOperation,
  type SearchItem,
  type SearchOperation,
  validateNamespace,
} from "@langchain/langgraph-checkpoint";
import type { MemdClient } from "./client.js";
import { textsAt } from "./langgraph-paths.js";
import type { Memory } from "./types.gen.js";

export interface MemdStoreOptions {
  /** The memd namespace holding the store's items (default "langgraph"). */
  namespace?: string;
  /**
   * Which fields of a value are searched, as LangGraph's `index.fields` ("$" the whole value,
   * "a.b" a nested field). Default: the whole value. A put's own `index` overrides it.
   */
  index?: { fields?: string[] };
}

const SEPARATOR = ".";
/** memd answers at most 100 search hits; a page of a list at most 1000 memories; a query of 1000 characters. */
const SEARCH_DEPTH = 100;
const LIST_PAGE = 1000;
const QUERY_CHARS = 1000;

/**
 * A LangGraph `BaseStore` backed by memd. Reads of a batch see the state before its puts, and of
 * several puts of one item the last wins, as in LangGraph's InMemoryStore.
 */
export class MemdStore extends BaseStore {
  readonly namespace: string;
  private readonly fields: string[];

  constructor(
    private readonly client: MemdClient,
    options: MemdStoreOptions = {},
  ) {
    super();
    this.namespace = options.namespace ?? "langgraph";
    this.fields = options.index?.fields ?? ["$"];
  }

  async batch<Op extends Operation[]>(operations: Op): Promise<OperationResults<Op>> {
    const results: unknown[] = [];
    const puts = new Map<string, PutOperation>();
    for (const op of operations) {
      if ("namespacePrefix" in op) results.push(await this.searchOp(op));
      else if ("value" in op) {
        checkNamespace(op.namespace);
        puts.set(JSON.stringify([op.namespace, op.key]), op);
        results.push(null); // as InMemoryStore answers a put
      } else if ("matchConditions" in op) results.push(await this.listNamespacesOp(op));
      else results.push(await this.getOp(op as GetOperation));
    }
    for (const op of puts.values()) await this.putOp(op);
    return results as OperationResults<Op>;
  }

  private async getOp(op: GetOperation): Promise<Item | null> {
    checkNamespace(op.namespace);
    const memory = await this.client.getByKey({
      namespace: this.namespace,
      entity: entityOf(op.namespace),
      key: op.key,
    });
    return memory ? itemOf(memory) : null;
  }

  private async putOp(op: PutOperation): Promise<void> {
    const entity = entityOf(op.namespace);
    if (op.value === null) {
      const memory = await this.client.getByKey({ namespace: this.namespace, entity, key: op.key });
      if (memory) await this.client.delete(memory.id).catch(ignoreGone);
      return;
    }
    const fields = op.index === false ? [] : (op.index ?? this.fields);
    const texts = fields.flatMap((f) => textsAt(op.value, f));
    // A memory needs content: an item with nothing to index is found by its key.
    const content = texts.filter((t) => t.trim() !== "").join("\n") || op.key;
    await this.client.store({ namespace: this.namespace, entity, key: op.key, content, metadata: op.value });
  }

  private async searchOp(op: SearchOperation): Promise<SearchItem[]> {
    if (op.namespacePrefix.length > 0) checkNamespace(op.namespacePrefix);
    const prefix = op.namespacePrefix.length > 0 ? entityOf(op.namespacePrefix) : undefined;
    const offset = op.offset ?? 0;
    const limit = op.limit ?? 10;
    const wanted = (m: Memory) =>
      m.key !== undefined && under(m.entity, prefix) && matchesFilter(m.metadata ?? {}, op.filter);
    // Every item under the prefix, in the order InMemoryStore keeps them: namespaces by their first
    // item, items by when they were first put (memd's ids grow with time; an update keeps its id).
    const all = async () => byFirstPut((await this.memories(prefix)).filter(wanted));
    const query = [...(op.query ?? "").trim()].slice(0, QUERY_CHARS).join("");
    if (!query) return (await all()).slice(offset, offset + limit).map((m) => ({ ...itemOf(m), score: undefined }));
    // The prefix's own entity, and those below it (a plain text prefix would also take "usersX").
    const scopes = prefix === undefined ? [{}] : [{ entity: prefix }, { entityPrefix: prefix + SEPARATOR }];
    const answers = await Promise.all(
      scopes.map((scope) => this.client.search({ namespace: this.namespace, query, limit: SEARCH_DEPTH, ...scope })),
    );
    const hits = answers
      .flatMap((a) => a.results)
      .filter(wanted)
      .sort((a, b) => b.score - a.score);
    const found: SearchItem[] = hits.map((m) => ({ ...itemOf(m), score: m.score }));
    // As InMemoryStore does with items it cannot score: after the scored ones, without a score.
    if (found.length < offset + limit) {
      const scored = new Set(hits.map((m) => m.id));
      for (const m of await all()) if (!scored.has(m.id)) found.push({ ...itemOf(m), score: undefined });
    }
    return found.slice(offset, offset + limit);
  }

  private async listNamespacesOp(op: ListNamespacesOperation): Promise<string[][]> {
    // The labels a prefix condition fixes narrow the read to entities starting with them.
    const fixed: string[] = [];
    for (const label of op.matchConditions?.find((c) => c.matchType === "prefix")?.path ?? []) {
      if (label === "*") break;
      fixed.push(label);
    }
    const namespaces: string[][] = [];
    let cursor: string | undefined;
    do {
      const page = await this.client.entities({
        namespace: this.namespace,
        limit: LIST_PAGE,
        ...(fixed.length ? { prefix: entityOf(fixed) } : {}),
        ...(cursor ? { cursor } : {}),
      });
      for (const e of page.entities) if (e.memories > 0) namespaces.push(e.entity.split(SEPARATOR));
      cursor = page.nextCursor ?? undefined;
    } while (cursor);
    let matched = namespaces.filter((ns) => (op.matchConditions ?? []).every((c) => matches(c, ns)));
    if (op.maxDepth !== undefined) {
      const cut = new Map(matched.map((ns) => [ns.slice(0, op.maxDepth).join(":"), ns.slice(0, op.maxDepth)]));
      matched = [...cut.values()];
    }
    matched.sort((a, b) => a.join(":").localeCompare(b.join(":")));
    return matched.slice(op.offset ?? 0, (op.offset ?? 0) + (op.limit ?? matched.length));
  }

  /** Every current memory under an entity prefix, a page at a time. */
  private async memories(prefix: string | undefined): Promise<Memory[]> {
    const out: Memory[] = [];
    let cursor: string | undefined;
    do {
      const page = await this.client.list({
        namespace: this.namespace,
        limit: LIST_PAGE,
        ...(prefix === undefined ? {} : { entityPrefix: prefix }),
        ...(cursor ? { cursor } : {}),
      });
      out.push(...page.memories);
      cursor = page.nextCursor ?? undefined;
    } while (cursor);
    return out;
  }
}

/** Items grouped by namespace in the order of each one's first item, each group oldest first. */
function byFirstPut(memories: Memory[]): Memory[] {
  const groups = new Map<string, Memory[]>();
  for (const m of [...memories].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))) {
    const group = groups.get(m.entity);
    if (group) group.push(m);
    else groups.set(m.entity, [m]);
  }
  return [...groups.values()].flat();
}

/** LangGraph's rules for a namespace, as InMemoryStore applies them (BaseStore.put refuses the "langgraph" root). */
function checkNamespace(namespace: string[]) {
  validateNamespace(namespace, { allowReservedRoot: true });
}

const entityOf = (namespace: string[]) => namespace.join(SEPARATOR);

/** The entity is the prefix's namespace or one below it ("a.b" is under "a", "a.bc" is not). */
const under = (entity: string, prefix: string | undefined) =>
  prefix === undefined || entity === prefix || entity.startsWith(prefix + SEPARATOR);

function itemOf(m: Memory): Item {
  return {
    value: (m.metadata ?? {}) as Record<string, unknown>,
    key: m.key as string,
    namespace: m.entity.split(SEPARATOR),
    createdAt: new Date(m.createdAt),
    updatedAt: new Date(m.updatedAt ?? m.createdAt),
  };
}

const ignoreGone = (e: unknown) => {
  if ((e as { status?: number }).status !== 404) throw e;
};

function matches({ matchType, path }: MatchCondition, ns: string[]): boolean {
  if (path.length > ns.length) return false;
  const start = matchType === "prefix" ? 0 : ns.length - path.length;
  return path.every((label, i) => label === "*" || ns[start + i] === label);
}

const operators = new Set(["$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin"]);

/** A value meets a filter as in LangGraph's InMemoryStore: top-level fields, exact or by operator. */
function matchesFilter(value: Record<string, unknown>, filter: Record<string, unknown> | undefined): boolean {
  if (!filter) return true;
  return Object.entries(filter).every(([field, wanted]) => compare(value[field], wanted));
}

function compare(have: unknown, wanted: unknown): boolean {
  const ops = wanted as Record<string, unknown>;
  if (typeof wanted !== "object" || wanted === null || !Object.keys(wanted).every((k) => operators.has(k)))
    return have === wanted;
  return Object.entries(ops).every(([op, v]) => {
    switch (op) {
      case "$eq":
        return have === v;
      case "$ne":
        return have !== v;
      case "$gt":
        return Number(have) > Number(v);
      case "$gte":
        return Number(have) >= Number(v);
      case "$lt":
        return Number(have) < Number(v);
      case "$lte":
        return Number(have) <= Number(v);
      case "$in":
        return Array.isArray(v) && v.includes(have);
      default:
        return Array.isArray(v) ? !v.includes(have) : true; // $nin
    }
  });
}
