/** A memory's key in a namespace-scoped index: [namespace, entity, memoryId]. */
export type Touched = readonly [string, string, string];

/**
 * Brings an in-memory copy of an index up to date with what a committed write touched: per
 * memory, `read` each touched key from LMDB (an entity change touches two); where it is found now,
 * `put` it; in every other loaded namespace it was touched in, `drop` it. Namespaces not loaded
 * (`loaded` false) are left alone: they are read whole on first use.
 */
export function refreshTouched<V>(
  touched: readonly Touched[],
  loaded: (namespace: string) => boolean,
  read: (key: Touched) => V | undefined,
  drop: (key: Touched) => void,
  put: (key: Touched, value: V) => void,
) {
  const byId = new Map<string, Touched[]>();
  for (const t of touched) if (loaded(t[0])) byId.set(t[2], [...(byId.get(t[2]) ?? []), t]);
  for (const ks of byId.values()) {
    let found: [Touched, V] | undefined;
    for (const k of ks) {
      const v = read(k);
      if (v !== undefined) found = [k, v];
    }
    for (const k of ks) if (found?.[0][0] !== k[0]) drop(k);
    if (found) put(found[0], found[1]);
  }
}
