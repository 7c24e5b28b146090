import type { KeyRecord } from "../keys/model";
import type { Browse, NamespaceSummary } from "../storage/storage";
import { invalidField } from "../wire/errors";
import { isoTime } from "../wire/time";
import type { EntitiesResponse, NamespacesResponse } from "./model";

/** Names compare in UTF-8 byte order, the order both backends list namespaces in. */
const byteOrder = (a: string, b: string) => Buffer.compare(Buffer.from(a), Buffer.from(b));

type CursorBody = { k: "namespaces" } | { k: "entities"; ns: string };

/** A page cursor: the last name returned and what query it belongs to, opaque to clients. */
export function encodeCursor(body: CursorBody, last: string): string {
  return Buffer.from(JSON.stringify({ ...body, a: last })).toString("base64url");
}

/** The name a cursor continues after, or a 400 if it is malformed or was made for another query. */
export function decodeCursor(cursor: string | undefined, expected: CursorBody): string | undefined {
  if (cursor === undefined) return undefined;
  let body: Record<string, unknown> | undefined;
  try {
    body = JSON.parse(Buffer.from(cursor, "base64url").toString("utf8"));
  } catch {
    body = undefined;
  }
  const same =
    body !== null &&
    typeof body === "object" &&
    typeof body.a === "string" &&
    body.k === expected.k &&
    (expected.k !== "entities" || body.ns === expected.ns);
  if (!same)
    throw invalidField("cursor", "is not a cursor of this query; pass nextCursor of the previous page as it is");
  return body!.a as string;
}

/**
 * The namespaces the key covers that hold data, in byte order, one page. Each of the key's
 * patterns is one bounded read: `*` all, `team/*` a prefix range, an exact name one lookup.
 */
export async function listNamespaces(
  storage: Browse,
  key: KeyRecord,
  limit: number,
  cursor?: string,
): Promise<NamespacesResponse> {
  const after = decodeCursor(cursor, { k: "namespaces" });
  const exact = async (name: string): Promise<NamespaceSummary[]> => {
    if (after !== undefined && byteOrder(name, after) <= 0) return [];
    // The name itself is the first one that starts with it.
    return (await storage.namespaces({ prefix: name, limit: 1 })).filter((n) => n.namespace === name);
  };
  const reads = key.namespaces.includes("*")
    ? [storage.namespaces({ after, limit: limit + 1 })]
    : key.namespaces.map((p) =>
        p.endsWith("/*") ? storage.namespaces({ prefix: p.slice(0, -1), after, limit: limit + 1 }) : exact(p),
      );
  const seen = new Map<string, NamespaceSummary>();
  for (const page of await Promise.all(reads)) for (const n of page) seen.set(n.namespace, n);
  const all = [...seen.values()].sort((a, b) => byteOrder(a.namespace, b.namespace));
  const page = all.slice(0, limit);
  return {
    namespaces: page.map((n) => ({
      namespace: n.namespace,
      memories: n.memories,
      lastEventAt: isoTime(n.lastEventAtMs),
    })),
    nextCursor: all.length > limit ? encodeCursor({ k: "namespaces" }, page.at(-1)!.namespace) : null,
  };
}

/** The entities of a namespace that have events, one page, with memory counts and last change. */
export async function listEntities(
  storage: Browse,
  namespace: string,
  limit: number,
  cursor?: string,
  prefix?: string,
): Promise<EntitiesResponse> {
  const after = decodeCursor(cursor, { k: "entities", ns: namespace });
  const found = await storage.entities(namespace, { prefix, after, limit: limit + 1 });
  const page = found.slice(0, limit);
  return {
    entities: page.map((e) => ({ entity: e.entity, memories: e.memories, lastChangeAt: isoTime(e.lastEventAtMs) })),
    nextCursor: found.length > limit ? encodeCursor({ k: "entities", ns: namespace }, page.at(-1)!.entity) : null,
  };
}
