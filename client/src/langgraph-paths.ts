// The texts at a path of a LangGraph value, as LangGraph's InMemoryStore reads the fields it
// indexes (store/utils.js of @langchain/langgraph-checkpoint, which the package does not export):
// "$" the whole value, "a.b" nested fields, "a[0]", "a[-1]", "a[*]" array items, "*" every value,
// "{a,b.c}" several fields. A number or boolean is its text; an object or array its JSON.

/** A path split into its parts: "a.b[*].c" → ["a", "b", "[*]", "c"]. */
export function tokenizePath(path: string): string[] {
  const tokens: string[] = [];
  let current = "";
  for (let i = 0; i < path.length; ) {
    const char = path[i];
    if (char === "[" || char === "{") {
      if (current) tokens.push(current);
      current = "";
      const close = char === "[" ? "]" : "}";
      let depth = 0;
      let group = "";
      do {
        if (path[i] === char) depth += 1;
        else if (path[i] === close) depth -= 1;
        group += path[i];
        i += 1;
      } while (i < path.length && depth > 0);
      tokens.push(group);
      continue;
    }
    if (char === ".") {
      if (current) tokens.push(current);
      current = "";
    } else current += char;
    i += 1;
  }
  if (current) tokens.push(current);
  return tokens;
}

const asText = (v: unknown): string[] =>
  typeof v === "string" || typeof v === "number" || typeof v === "boolean"
    ? [String(v)]
    : v !== null && typeof v === "object"
      ? [JSON.stringify(v, null, 2)]
      : [];

/** Every text found at `path` in `value` (none when the path leads nowhere). */
export function textsAt(value: unknown, path: string): string[] {
  if (!path || path === "$") return [JSON.stringify(value, null, 2)];
  const tokens = tokenizePath(path);
  const walk = (obj: unknown, pos: number): string[] => {
    if (pos >= tokens.length) return asText(obj);
    const token = tokens[pos];
    if (token.startsWith("[") && token.endsWith("]")) {
      if (!Array.isArray(obj)) return [];
      const index = token.slice(1, -1);
      if (index === "*") return obj.flatMap((item) => walk(item, pos + 1));
      let i = Number.parseInt(index, 10);
      if (i < 0) i += obj.length;
      return i >= 0 && i < obj.length ? walk(obj[i], pos + 1) : [];
    }
    if (token.startsWith("{") && token.endsWith("}")) {
      if (obj === null || typeof obj !== "object") return [];
      return token
        .slice(1, -1)
        .split(",")
        .flatMap((field) => {
          let at: unknown = obj;
          for (const part of tokenizePath(field.trim())) {
            if (at === null || typeof at !== "object" || !(part in at)) return [];
            at = (at as Record<string, unknown>)[part];
          }
          return at === undefined ? [] : asText(at);
        });
    }
    if (token === "*") {
      if (Array.isArray(obj)) return obj.flatMap((item) => walk(item, pos + 1));
      return obj !== null && typeof obj === "object" ? Object.values(obj).flatMap((v) => walk(v, pos + 1)) : [];
    }
    return obj !== null && typeof obj === "object" && token in obj
      ? walk((obj as Record<string, unknown>)[token], pos + 1)
      : [];
  };
  return walk(value, 0);
}
