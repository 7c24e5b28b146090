// The top-k pick over a search's scores (the vector search's exact rescoring, lmdb/search.ts).
/**
 * Indexes of the `k` largest of the first `n` values and of any equal to the k-th (all when
 * k ≥ n), unordered.
 */
export function topIndexes(values: Float32Array | Float64Array, k: number, n = values.length): number[] {
  if (k >= n) return Array.from({ length: n }, (_, i) => i);
  // The k-th largest value by a min-heap of the best k seen, then everything at or above it.
  const heap = new Float64Array(k);
  let size = 0;
  for (let i = 0; i < n; i++) {
    const v = values[i];
    if (size < k) {
      let c = size++;
      while (c > 0) {
        const p = (c - 1) >> 1;
        if (heap[p] <= v) break;
        heap[c] = heap[p];
        c = p;
      }
      heap[c] = v;
    } else if (v > heap[0]) {
      let c = 0;
      for (;;) {
        const l = 2 * c + 1;
        if (l >= k) break;
        const m = l + 1 < k && heap[l + 1] < heap[l] ? l + 1 : l;
        if (heap[m] >= v) break;
        heap[c] = heap[m];
        c = m;
      }
      heap[c] = v;
    }
  }
  const cut = heap[0];
  const out: number[] = [];
  for (let i = 0; i < n; i++) if (values[i] >= cut) out.push(i);
  return out;
}
