// memd's default embedder: a static table of token vectors distilled from Universal Sentence
// Encoder lite (scripts/distill-embedder.ts says how). A text's vector is the SIF-weighted mean of
// its tokens' vectors, less the corpus mean, so embedding is a table look-up per token: no model
// runs, nothing is fetched, and it works the same inside the compiled binary.
//
// The table file (default-embedder.bin), little-endian:
//   "MEMDEMB1", u32 header length, JSON header { dims, pieces, scores, sifA },
//   padding to 4 bytes, f32 mean[dims], f32 rowScale[vocab], i8 table[vocab × dims].
// Pieces and scores are the teacher's sentencepiece vocabulary (unigram log-probabilities), so
// text is cut into tokens exactly as the teacher cuts it (tokenize below).

export const magic = "MEMDEMB1";

export interface TableHeader {
  dims: number;
  /** The sentencepiece pieces, by token id ("▁" marks a word's start). */
  pieces: string[];
  /** Each piece's log-probability (the tokenizer's scores, and p(token) for the SIF weights). */
  scores: number[];
  /** SIF's a: a token weighs a / (a + p(token)). */
  sifA: number;
  /** How it was made (the distillation's inputs and figures), for the curious. */
  about?: Record<string, unknown>;
}

/** Tokens the teacher reserves (unknown, <s>, </s>, three extras): never a piece of text. */
const reserved = 6;
/** Characters of a text that count: a longer memory's vector is that of its start. */
const maxChars = 4000;

interface TrieNode {
  next: Map<number, TrieNode>;
  /** The token ending here, or -1. */
  id: number;
}

/** The teacher's sentencepiece tokenizer (the unigram model's best segmentation, as @energetic-ai/embeddings does it). */
export class Tokenizer {
  private readonly root: TrieNode = { next: new Map(), id: -1 };
  /** Length of each piece in code points. */
  private readonly lengths: Int32Array;

  constructor(
    pieces: readonly string[],
    private readonly scores: readonly number[],
  ) {
    this.lengths = new Int32Array(pieces.length);
    for (let id = 0; id < pieces.length; id++) {
      const cps = [...pieces[id]];
      this.lengths[id] = cps.length;
      if (id < reserved) continue;
      let node = this.root;
      for (const ch of cps) {
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
  }

  /** Token ids of `text`; characters outside the vocabulary become the unknown token (0), runs of them one. */
  encode(text: string): number[] {
    const normalized = text.normalize("NFKC");
    if (normalized.length === 0) return [];
    const cps: number[] = [];
    cps.push(0x2581);
    for (const ch of normalized) cps.push(ch === " " ? 0x2581 : ch.codePointAt(0)!);
    const n = cps.length;
    // best[end]: the best segmentation's score of cps[0, end); word[end]: its last token. Pieces
    // are tried by start, then length, as the teacher tries them: ties go to the later start, and
    // a score of exactly 0 counts as none. best[i] is final once every start before i is done.
    const best = new Float64Array(n + 1);
    const word = new Int32Array(n + 1);
    for (let i = 0; i < n; i++) {
      let node: TrieNode | undefined = this.root.next.get(cps[i]);
      let found = false;
      for (let j = i; j < n && node; j++) {
        if (node.id >= 0) {
          found = true;
          const score = this.scores[node.id] + best[i];
          if (best[j + 1] === 0 || score >= best[j + 1]) {
            best[j + 1] = score;
            word[j + 1] = node.id;
          }
        }
        node = node.next.get(cps[j + 1]);
      }
      // No piece starts here: the character alone, as the unknown token (score 0).
      if (!found && (best[i + 1] === 0 || best[i] >= best[i + 1])) {
        best[i + 1] = best[i];
        word[i + 1] = 0;
      }
    }
    const out: number[] = [];
    for (let at = n; at > 0; ) {
      out.push(word[at]);
      at -= word[at] === 0 ? 1 : this.lengths[word[at]];
    }
    out.reverse();
    const merged: number[] = [];
    for (let i = 0; i < out.length; i++) if (!(out[i] === 0 && i > 0 && out[i - 1] === 0)) merged.push(out[i]);
    return merged;
  }
}

export interface StaticEmbedder {
  dims: number;
  tokenizer: Tokenizer;
  /** The vector of `text` (unit length; all zeros when no token has a vector). */
  embed(text: string): Float32Array;
}

/** Reads a table file (the layout above). */
export function parseTable(bytes: Uint8Array): StaticEmbedder {
  const head = new TextDecoder().decode(bytes.subarray(0, 8));
  if (head !== magic) throw new Error("not a memd embedder table");
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const headerLen = view.getUint32(8, true);
  const header = JSON.parse(new TextDecoder().decode(bytes.subarray(12, 12 + headerLen))) as TableHeader;
  let at = 12 + headerLen;
  at += (4 - (at % 4)) % 4;
  const { dims, pieces, scores, sifA } = header;
  const vocab = pieces.length;
  const copy = (n: number, width: number) => {
    const b = bytes.slice(at, at + n * width);
    at += n * width;
    return b.buffer;
  };
  const mean = new Float32Array(copy(dims, 4));
  const rowScale = new Float32Array(copy(vocab, 4));
  const table = new Int8Array(copy(vocab * dims, 1));
  const weight = new Float32Array(vocab);
  for (let id = 0; id < vocab; id++) weight[id] = id < reserved ? 0 : sifA / (sifA + Math.exp(scores[id]));
  const tokenizer = new Tokenizer(pieces, scores);
  return {
    dims,
    tokenizer,
    embed(text) {
      const ids = tokenizer.encode(text.length > maxChars ? text.slice(0, maxChars) : text);
      const v = new Float32Array(dims);
      let total = 0;
      for (const id of ids) {
        const w = weight[id];
        if (w === 0) continue;
        total += w;
        const s = w * rowScale[id];
        const row = id * dims;
        for (let d = 0; d < dims; d++) v[d] += s * table[row + d];
      }
      if (total === 0) return v;
      let norm = 0;
      for (let d = 0; d < dims; d++) {
        v[d] = v[d] / total - mean[d];
        norm += v[d] * v[d];
      }
      norm = Math.sqrt(norm);
      if (norm > 0) for (let d = 0; d < dims; d++) v[d] /= norm;
      return v;
    },
  };
}

/** Writes a table file (the layout above). */
export function encodeTable(
  header: TableHeader,
  mean: Float32Array,
  rowScale: Float32Array,
  table: Int8Array,
): Uint8Array {
  const json = new TextEncoder().encode(JSON.stringify(header));
  let at = 12 + json.length;
  const pad = (4 - (at % 4)) % 4;
  at += pad;
  const out = new Uint8Array(at + mean.byteLength + rowScale.byteLength + table.byteLength);
  out.set(new TextEncoder().encode(magic), 0);
  new DataView(out.buffer).setUint32(8, json.length, true);
  out.set(json, 12);
  out.set(new Uint8Array(mean.buffer, mean.byteOffset, mean.byteLength), at);
  at += mean.byteLength;
  out.set(new Uint8Array(rowScale.buffer, rowScale.byteOffset, rowScale.byteLength), at);
  at += rowScale.byteLength;
  out.set(new Uint8Array(table.buffer, table.byteOffset, table.byteLength), at);
  return out;
}
