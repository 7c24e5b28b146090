// @targets lmdb
// The built-in embedder's fast paths (a text's tokens looked up word by word, the weighted mean in
// WebAssembly: src/embedding/static-embedder.ts, mean-kernel.ts) give bit for bit the vectors of
// the plain way below: the whole text segmented at once, the mean summed in JavaScript.
import { expect, test } from "bun:test";
import { builtinEmbedder } from "../../src/embedding/builtin";
import tablePath from "../../src/embedding/default-embedder.bin" with { type: "file" };
import type { TableHeader } from "../../src/embedding/static-embedder";

/** The table's parts, read as parseTable reads them. */
async function table() {
  const bytes = new Uint8Array(await Bun.file(tablePath).arrayBuffer());
  const headerLen = new DataView(bytes.buffer).getUint32(8, true);
  const header = JSON.parse(new TextDecoder().decode(bytes.subarray(12, 12 + headerLen))) as TableHeader;
  let at = 12 + headerLen;
  at += (4 - (at % 4)) % 4;
  const take = (n: number, width: number) => {
    const part = bytes.slice(at, at + n * width).buffer;
    at += n * width;
    return part;
  };
  const { dims, pieces } = header;
  return {
    header,
    mean: new Float32Array(take(dims, 4)),
    rowScale: new Float32Array(take(pieces.length, 4)),
    values: new Int8Array(take(pieces.length * dims, 1)),
  };
}

/** The plain way: the unigram model's best segmentation of the whole text, then the mean in JavaScript. */
function plainEmbedder(t: Awaited<ReturnType<typeof table>>) {
  const { dims, pieces, scores, sifA } = t.header;
  type Node = { next: Map<number, Node>; id: number };
  const root: Node = { next: new Map(), id: -1 };
  const lengths = pieces.map((p) => [...p].length);
  for (let id = 6; id < pieces.length; id++) {
    let node = root;
    for (const ch of pieces[id]) {
      const c = ch.codePointAt(0)!;
      let n = node.next.get(c);
      if (!n) {
        n = { next: new Map(), id: -1 };
        node.next.set(c, n);
      }
      node = n;
    }
    node.id = id;
  }
  const encode = (text: string) => {
    const normalized = text.normalize("NFKC");
    if (normalized.length === 0) return [];
    const cps = [0x2581, ...[...normalized].map((ch) => (ch === " " ? 0x2581 : ch.codePointAt(0)!))];
    const n = cps.length;
    const best = new Float64Array(n + 1);
    const word = new Int32Array(n + 1);
    for (let i = 0; i < n; i++) {
      let node = root.next.get(cps[i]);
      let found = false;
      for (let j = i; j < n && node; j++) {
        if (node.id >= 0) {
          found = true;
          const score = scores[node.id] + best[i];
          if (best[j + 1] === 0 || score >= best[j + 1]) {
            best[j + 1] = score;
            word[j + 1] = node.id;
          }
        }
        node = node.next.get(cps[j + 1]);
      }
      if (!found && (best[i + 1] === 0 || best[i] >= best[i + 1])) {
        best[i + 1] = best[i];
        word[i + 1] = 0;
      }
    }
    const out: number[] = [];
    for (let at = n; at > 0; at -= word[at] === 0 ? 1 : lengths[word[at]]) out.push(word[at]);
    out.reverse();
    return out.filter((id, i) => !(id === 0 && i > 0 && out[i - 1] === 0));
  };
  const weight = Float32Array.from(pieces, (_, id) => (id < 6 ? 0 : sifA / (sifA + Math.exp(scores[id]))));
  return (text: string) => {
    const v = new Float32Array(dims);
    let total = 0;
    for (const id of encode(text.slice(0, 4000))) {
      const w = weight[id];
      if (w === 0) continue;
      total += w;
      const s = w * t.rowScale[id];
      for (let d = 0; d < dims; d++) v[d] += s * t.values[id * dims + d];
    }
    if (total === 0) return v;
    let norm = 0;
    for (let d = 0; d < dims; d++) {
      v[d] = v[d] / total - t.mean[d];
      norm += v[d] * v[d];
    }
    norm = Math.sqrt(norm);
    if (norm > 0) for (let d = 0; d < dims; d++) v[d] /= norm;
    return v;
  };
}

test("the built-in embedder's vectors are bit for bit those of the plain segmentation and mean", async () => {
  const t = await table();
  const plain = plainEmbedder(t);
  const e = await builtinEmbedder();
  let seed = 20261129;
  const rand = (n: number) => {
    seed = (seed * 1103515245 + 12345) & 0x7fffffff;
    return seed % n;
  };
  const words = t.header.pieces.slice(6).map((p) => p.replace(/^▁/, ""));
  const texts = [
    "",
    " ",
    "  two  spaces  ",
    "The user prefers green tea in the morning",
    "I moved to Lisbon last spring and started learning Portuguese.",
    // Pieces scored 0 (":00", "▁:-)"), first and after another word, where "0 counts as none".
    // (A text whose words so far score exactly 0 goes on as its first word does.)
    ":-)",
    ":-) :-) ok",
    ": :) :( then :-) at 10:30",
    "see you :-) at 10:00",
    ":00 then :00:00",
    "中文 and 日本語, ﬁne ligatures, Ünïcödé, emoji 😀😀 and tabs\there",
    "x".repeat(4100),
    "again ".repeat(900),
  ];
  // Random runs of the table's own pieces and characters, spaces between some.
  for (let i = 0; i < 300; i++) {
    let s = "";
    for (let j = 1 + rand(20); j > 0; j--) s += words[rand(words.length)] + (rand(3) ? " " : "");
    texts.push(s);
  }
  let compared = 0;
  // Twice: the second time every word comes from the tokenizer's cache.
  for (let round = 0; round < 2; round++)
    for (const text of texts) {
      const want = plain(text);
      const got = e.embed(text);
      expect(got.length).toBe(want.length);
      for (let d = 0; d < want.length; d++)
        if (!Object.is(got[d], want[d])) expect([text, d, got[d]]).toEqual([text, d, want[d]]);
      compared++;
    }
  expect(compared).toBe(2 * texts.length);
});
