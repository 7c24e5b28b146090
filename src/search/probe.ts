// How much hybrid search may trust the embedding model's ranking, measured once per model (and
// dimension) on a fixed probe set instead of guessed per query. Each probe is an anchor sentence,
// a paraphrase of it that shares none of its content words, and a distractor that shares its
// words but means something else. A model that knows meaning puts the paraphrase nearer the
// anchor; a lexical one (a bag of words, a hashed or static word table) puts the distractor
// nearer, always. The share of probes it gets right sets the weight of the semantic list in the
// fusion (fusion.ts): a lexical model would only reorder keyword's own hits by word overlap,
// which the keyword ranking already does better (bench/notes.md, issue 21).
// The probe texts are embedded in the same call as the first hybrid search's query (so that search
// costs one call, 48 more inputs), and the share is kept for the life of the server.
import type { Core } from "../core";
import { type EmbedCost, type EmbedSettings, embedTexts } from "../embedding/client";

/** [anchor, paraphrase without a shared content word, distractor sharing words with another meaning]. */
export const PROBES: readonly (readonly [string, string, string])[] = [
  [
    "The meeting was moved to next Tuesday.",
    "We rescheduled our appointment for the following week.",
    "Tuesday's meeting moved me to tears.",
  ],
  [
    "My car broke down on the highway.",
    "The vehicle stopped working while I was driving on the motorway.",
    "She broke the highway speed record in her new car.",
  ],
  ["He lost his job last month.", "He was fired a few weeks ago.", "His last job was finding lost luggage each month."],
  ["She is afraid of flying.", "Airplanes terrify her.", "Flying ants are what she is afraid of in summer."],
  [
    "The doctor told me to eat less sugar.",
    "My physician advised cutting down on sweets.",
    "Sugar, the doctor's cat, will not eat less than twice a day.",
  ],
  [
    "We bought a house near the beach.",
    "Our family purchased a home close to the seaside.",
    "We bought beach towels at a house sale near the station.",
  ],
  [
    "The children are playing football in the garden.",
    "The kids kick a ball around the backyard.",
    "The garden football club's children's choir is playing tonight.",
  ],
  [
    "I can't sleep because of the noise from the street.",
    "Traffic sounds outside keep me awake at night.",
    "The street noise band plays sleep music.",
  ],
  [
    "The price of bread went up again.",
    "Loaves cost more than they used to.",
    "She went up to get bread again, whatever the price.",
  ],
  [
    "She passed her driving exam.",
    "She got her licence after the road test.",
    "She passed the exam room while driving to work.",
  ],
  ["My grandmother died last year.", "We lost granny twelve months ago.", "My grandmother dyed her hair last year."],
  [
    "The river flooded the village.",
    "Water from the overflowing stream covered the small town.",
    "The village river festival flooded the streets with visitors.",
  ],
  [
    "He quit smoking ten years ago.",
    "A decade back, he gave up cigarettes.",
    "Ten years ago he started smoking salmon as a hobby.",
  ],
  [
    "They are getting married in June.",
    "Their wedding is planned for early summer.",
    "June, their married neighbour, is getting a dog.",
  ],
  [
    "The baby has a high fever.",
    "Our infant's temperature is very elevated.",
    "The band's new single, Baby Fever, went high in the charts.",
  ],
  [
    "I left my phone at the office.",
    "My mobile is still on my desk at work.",
    "The office phone left a message for me.",
  ],
];

const probeTexts = PROBES.flat();

function cosine(a: Float32Array, b: Float32Array): number {
  let dot = 0;
  let na = 0;
  let nb = 0;
  for (let i = 0; i < a.length && i < b.length; i++) {
    dot += a[i] * b[i];
    na += a[i] * a[i];
    nb += b[i] * b[i];
  }
  return na && nb ? dot / Math.sqrt(na * nb) : 0;
}

/** The share of PROBES ranked right (paraphrase strictly nearer the anchor), from their vectors in order. */
export function probeShare(vectors: readonly Float32Array[]): number {
  let right = 0;
  for (let i = 0; i < PROBES.length; i++) {
    const [anchor, paraphrase, distractor] = [vectors[3 * i], vectors[3 * i + 1], vectors[3 * i + 2]];
    if (cosine(anchor, paraphrase) > cosine(anchor, distractor)) right++;
  }
  return right / PROBES.length;
}

/** Per server (its Core): the share of each model (base URL, model, dimensions), or the call measuring it. */
const shares = new WeakMap<object, Map<string, number | Promise<number | undefined>>>();

/**
 * The query's vector and the model's probe share. The first call for a model embeds the probe
 * texts with the query (one call); searches arriving while it runs wait for its share (0 if that
 * call failed: the semantic list then only adds its standouts, as for a lexical model). A failed
 * call throws (EmbedError) and is measured again on the next search.
 */
export async function embedQueryWithShare(
  core: Pick<Core<unknown>, "logger" | "shutdown">,
  s: EmbedSettings,
  query: string,
  cost: EmbedCost,
): Promise<{ vector: Float32Array; share: number }> {
  const byModel = shares.get(core) ?? new Map<string, number | Promise<number | undefined>>();
  shares.set(core, byModel);
  const key = JSON.stringify([s.baseUrl, s.model, s.dimensions ?? null]);
  const known = byModel.get(key);
  if (known !== undefined) {
    const [[vector], share] = await Promise.all([embedTexts(s, [query], cost, core.shutdown), known]);
    return { vector, share: share ?? 0 };
  }
  const measured = Promise.withResolvers<number | undefined>();
  byModel.set(key, measured.promise);
  try {
    const [vector, ...probes] = await embedTexts(s, [query, ...probeTexts], cost, core.shutdown);
    const share = probeShare(probes);
    byModel.set(key, share);
    measured.resolve(share);
    core.logger.info("embedding model probed for hybrid search", {
      model: s.model,
      paraphrasesRankedRight: `${Math.round(share * PROBES.length)} of ${PROBES.length}`,
    });
    return { vector, share };
  } catch (e) {
    byModel.delete(key);
    measured.resolve(undefined);
    throw e;
  }
}
