// Word-level difference of two texts, for the history timeline and the diff view.

export type Part = { kind: "same" | "added" | "removed"; text: string };

/** Splits into words and the whitespace between them, so joining the parts gives the text back. */
const tokens = (s: string) => s.split(/(\s+)/).filter((t) => t !== "");

/**
 * The longest common subsequence of the word tokens; above `maxCells` (quadratic cost) the
 * whole text is shown as removed then added, which stays correct, only coarser.
 */
export function wordDiff(oldText: string, newText: string, maxCells = 250_000): Part[] {
  const a = tokens(oldText);
  const b = tokens(newText);
  if (a.length * b.length > maxCells)
    return merge([
      { kind: "removed", text: oldText },
      { kind: "added", text: newText },
    ]);
  const n = a.length;
  const m = b.length;
  // lcs[i][j]: LCS length of a[i..] and b[j..], in one flat array.
  const lcs = new Uint32Array((n + 1) * (m + 1));
  for (let i = n - 1; i >= 0; i--)
    for (let j = m - 1; j >= 0; j--)
      lcs[i * (m + 1) + j] =
        a[i] === b[j]
          ? lcs[(i + 1) * (m + 1) + j + 1] + 1
          : Math.max(lcs[(i + 1) * (m + 1) + j], lcs[i * (m + 1) + j + 1]);
  const parts: Part[] = [];
  let i = 0;
  let j = 0;
  while (i < n && j < m) {
    if (a[i] === b[j]) {
      parts.push({ kind: "same", text: a[i] });
      i++;
      j++;
    } else if (lcs[(i + 1) * (m + 1) + j] >= lcs[i * (m + 1) + j + 1]) parts.push({ kind: "removed", text: a[i++] });
    else parts.push({ kind: "added", text: b[j++] });
  }
  while (i < n) parts.push({ kind: "removed", text: a[i++] });
  while (j < m) parts.push({ kind: "added", text: b[j++] });
  return merge(parts);
}

/** Joins neighbours of the same kind, so a changed phrase is one mark, not one per word. */
function merge(parts: Part[]): Part[] {
  const out: Part[] = [];
  for (const p of parts) {
    if (p.text === "") continue;
    const last = out.at(-1);
    if (last && last.kind === p.kind) last.text += p.text;
    else out.push({ ...p });
  }
  return out;
}
