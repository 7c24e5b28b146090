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

import { meanKernel } from "./mean-kernel";

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
/** Words whose tokens a tokenizer keeps (of each kind: see Tokenizer.words). */
const wordCacheSize = 50_000;

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

  /**
   * Each word's segmentation, by the word (what lies between two spaces): [0] as the text's
   * first words segment (while the text's score so far is exactly 0), [1] as the others do.
   * Emptied when full.
   */
  private readonly words = [new Map<string, Segmented>(), new Map<string, Segmented>()];

  /** Token ids of `text`; characters outside the vocabulary become the unknown token (0), runs of them one. */
  encode(text: string): number[] {
    const normalized = text.normalize("NFKC");
    if (normalized.length === 0) return [];
    // No piece holds "▁" but at its start, so no piece crosses a space: the best segmentation of
    // the text is that of each word ("▁" and the word) in turn, and a word's is looked up.
    const out: number[] = [];
    let zero = true;
    for (let from = 0; from <= normalized.length; ) {
      let to = normalized.indexOf(" ", from);
      if (to < 0) to = normalized.length;
      const word = normalized.slice(from, to);
      const cache: Map<string, Segmented> = this.words[zero ? 0 : 1];
      let seg = cache.get(word);
      if (seg === undefined) {
        seg = this.segment(word, zero);
        if (cache.size >= wordCacheSize) cache.clear();
        cache.set(word, seg);
      }
      for (const id of seg.ids) if (!(id === 0 && out.length > 0 && out[out.length - 1] === 0)) out.push(id);
      zero &&= seg.score === 0;
      from = to + 1;
    }
    return out;
  }

  /**
   * The best segmentation of "▁" + `word`. Pieces are tried by start, then length, as the
   * teacher tries them: ties go to the later start, and a score of exactly 0 counts as none.
   * That is, after a word that scored (`zero` false: every score here then adds to the text's
   * score before it, never 0), not yet reached. best[i] is final once every start before i is done.
   */
  private segment(word: string, zero: boolean): Segmented {
    const cps: number[] = [0x2581];
    for (const ch of word) cps.push(ch.codePointAt(0)!);
    const n = cps.length;
    // best[end]: the best segmentation's score of cps[0, end); last[end]: its last token.
    const best = new Float64Array(n + 1);
    const reached = new Uint8Array(n + 1);
    reached[0] = 1;
    const last = new Int32Array(n + 1);
    const none = (at: number) => (zero ? best[at] === 0 : reached[at] === 0);
    for (let i = 0; i < n; i++) {
      let node: TrieNode | undefined = this.root.next.get(cps[i]);
      let found = false;
      for (let j = i; j < n && node; j++) {
        if (node.id >= 0) {
          found = true;
          const score = this.scores[node.id] + best[i];
          if (none(j + 1) || score >= best[j + 1]) {
            best[j + 1] = score;
            reached[j + 1] = 1;
            last[j + 1] = node.id;
          }
        }
        node = node.next.get(cps[j + 1]);
      }
      // No piece starts here: the character alone, as the unknown token (score 0).
      if (!found && (none(i + 1) || best[i] >= best[i + 1])) {
        best[i + 1] = best[i];
        reached[i + 1] = 1;
        last[i + 1] = 0;
      }
    }
    const out: number[] = [];
    for (let at = n; at > 0; ) {
      out.push(last[at]);
      at -= last[at] === 0 ? 1 : this.lengths[last[at]];
    }
    return { ids: out.reverse(), score: best[n] };
  }
}

/** A word's tokens and its best segmentation's score. */
interface Segmented {
  ids: readonly number[];
  score: number;
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
  const weight = new Float32Array(vocab);
  for (let id = 0; id < vocab; id++) weight[id] = id < reserved ? 0 : sifA / (sifA + Math.exp(scores[id]));
  const tokenizer = new Tokenizer(pieces, scores);
  if (dims % 4 !== 0) throw new Error(`the table's dims (${dims}) must be a multiple of 4`);
  const mean = meanOf(
    dims,
    new Float32Array(copy(dims, 4)),
    new Float32Array(copy(vocab, 4)),
    new Int8Array(copy(vocab * dims, 1)),
    weight,
  );
  return {
    dims,
    tokenizer,
    embed: (text) => mean(tokenizer.encode(text.length > maxChars ? text.slice(0, maxChars) : text)),
  };
}

/** Tokens the kernel takes in one call (a longer text takes several: the same sum). */
const chunk = 4096;

/**
 * The unit vector of token ids `ids`: the SIF-weighted mean of their rows (int8 × the row's
 * scale), less the corpus mean, normalised; all zeros when no token has a weight. Computed by
 * mean-kernel.ts in a memory of its own holding the table.
 */
function meanOf(dims: number, mean: Float32Array, rowScale: Float32Array, table: Int8Array, weight: Float32Array) {
  const k = meanKernel();
  const bytes = dims * 4;
  const at = { mean: 0, out: bytes, rows: 2 * bytes, scales: 2 * bytes + chunk * 4 };
  const tableAt = at.scales + chunk * 8;
  k.memory.grow(Math.ceil((tableAt + table.byteLength) / 65536));
  const buffer = k.memory.buffer;
  new Float32Array(buffer, at.mean, dims).set(mean);
  new Int8Array(buffer, tableAt, table.byteLength).set(table);
  const out = new Float32Array(buffer, at.out, dims);
  const rows = new Int32Array(buffer, at.rows, chunk);
  const scales = new Float64Array(buffer, at.scales, chunk);
  return (ids: readonly number[]): Float32Array => {
    out.fill(0);
    let total = 0;
    let n = 0;
    for (const id of ids) {
      const w = weight[id];
      if (w === 0) continue;
      total += w;
      scales[n] = w * rowScale[id];
      rows[n++] = tableAt + id * dims;
      if (n === chunk) {
        k.sum(at.rows, at.scales, at.rows + n * 4, at.out, at.out + bytes);
        n = 0;
      }
    }
    if (total === 0) return new Float32Array(dims);
    k.sum(at.rows, at.scales, at.rows + n * 4, at.out, at.out + bytes);
    k.finish(at.out, at.out + bytes, at.mean, total);
    return out.slice();
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
