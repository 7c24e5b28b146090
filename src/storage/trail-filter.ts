// Which events of the audit trail a webhook wants (storage.ts TrailFilter), decided once for
// both backends: LMDB tests each event with matchesTrail, PostgreSQL puts patternParts in SQL.
import type { EventRecord } from "./records";
import type { TrailFilter } from "./storage";

/** A filter's namespace patterns taken apart: every namespace, exact names, and `prefix/` starts. */
export function patternParts(patterns: readonly string[]): { all: boolean; exact: string[]; prefixes: string[] } {
  const exact: string[] = [];
  const prefixes: string[] = [];
  let all = false;
  for (const p of patterns) {
    if (p === "*") all = true;
    else if (p.endsWith("/*")) prefixes.push(p.slice(0, -1));
    else exact.push(p);
  }
  return { all, exact, prefixes };
}

/** Whether `e` is one the filter wants. */
export function matchesTrail(filter: TrailFilter, e: EventRecord): boolean {
  if (filter.kinds.length > 0 && !filter.kinds.includes(e.event)) return false;
  return inNamespaces(filter, e.namespace);
}

/** Whether the filter's patterns cover `namespace` (an erasure is wanted whatever the kinds). */
export function inNamespaces(filter: TrailFilter, namespace: string): boolean {
  return filter.namespaces.some((p) =>
    p === "*" ? true : p.endsWith("/*") ? namespace.startsWith(p.slice(0, -1)) : p === namespace,
  );
}
