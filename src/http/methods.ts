import { ApiError } from "../wire/errors";

export interface RouteInfo {
  method: string;
  path: string;
}

interface Table {
  /** Exact paths, e.g. /v1/memory/diff → POST. */
  fixed: Map<string, Set<string>>;
  /** Paths with parameters, e.g. /v1/memory/:id → GET, DELETE. */
  patterns: { re: RegExp; methods: Set<string> }[];
}

function tableOf(routes: RouteInfo[]): Table {
  const fixed = new Map<string, Set<string>>();
  const byPattern = new Map<string, Set<string>>();
  for (const r of routes) {
    const method = r.method.toUpperCase();
    if (method === "ALL" || method === "WS") continue;
    const target = r.path.includes(":") || r.path.includes("*") ? byPattern : fixed;
    target.set(r.path, (target.get(r.path) ?? new Set()).add(method));
  }
  const patterns = [...byPattern].map(([path, methods]) => ({
    re: new RegExp(
      `^${path
        .replace(/[.+?^${}()|[\]\\]/g, "\\$&")
        .replace(/:\w+/g, "[^/]+")
        .replace(/\*/g, ".*")}$`,
    ),
    methods,
  }));
  return { fixed, patterns };
}

/** The methods a path answers to, as a router would pick: exact paths before patterns. */
function allowedFor(table: Table, path: string): Set<string> | undefined {
  const exact = table.fixed.get(path);
  if (exact) return exact;
  const out = new Set<string>();
  for (const p of table.patterns) if (p.re.test(path)) for (const m of p.methods) out.add(m);
  return out.size > 0 ? out : undefined;
}

/**
 * A known path with the wrong method answers 405 `method_not_allowed` with an `Allow` header,
 * rather than 404, or a 400 from a parameterized route that happens to match
 * (GET /v1/memory/diff would otherwise reach GET /v1/memory/:id). `routes` is read on the first
 * request, when every route is registered. The request pipeline calls the check, a function of
 * method and path (no query), after authentication (401 comes first).
 */
export function methodCheck(routes: () => RouteInfo[]): (method: string, path: string) => void {
  let table: Table | undefined;
  return (method, path) => {
    table ??= tableOf(routes());
    const allowed = allowedFor(table, path);
    if (!allowed) return;
    const m = method.toUpperCase();
    if (allowed.has(m) || (m === "HEAD" && allowed.has("GET"))) return;
    const allow = [...allowed].sort().join(", ");
    throw new ApiError("method_not_allowed", `this path answers only ${allow}`, undefined, { allow });
  };
}
