// Generates bench/search-set.json, the labelled retrieval set: 20 entities × 16 memories (one per
// topic, the wording picked per entity) and 60 queries (per entity: the same words, a paraphrase
// without the key word, and a typo), each with the memory that should come back. Deterministic:
// `bun run bench/search-set.ts` writes the same file every time.
import { writeFileSync } from "node:fs";
import { join } from "node:path";

/** Per topic: memory wordings, and for each a [words query, paraphrase query, typo query]. */
const topics: [string, [string, string, string]][][] = [
  [
    ["Is vegetarian and never eats meat", ["vegetarian meat", "does not eat animals", "vegitarian"]],
    ["Follows a strict keto diet", ["keto diet", "low carb eating plan", "ketto diet"]],
  ],
  [
    ["Has a golden retriever named Max", ["golden retriever", "owns a puppy", "golden retreiver"]],
    ["Owns two cats called Luna and Milo", ["cats Luna Milo", "has kittens at home", "two catts"]],
  ],
  [
    ["Lives in Lisbon near the river", ["lives Lisbon", "home city Portugal capital", "Lisbn"]],
    ["Moved to Berlin last spring", ["moved Berlin", "relocated to Germany", "Berln move"]],
  ],
  [
    ["Works as a nurse in a children's hospital", ["nurse hospital", "healthcare job with kids", "nurse hospitl"]],
    ["Is a software engineer at a bank", ["software engineer bank", "programmer in finance", "sofware enginer"]],
  ],
  [
    ["Plays the piano every evening", ["piano evening", "practices keyboard music", "pianno"]],
    [
      "Paints watercolor landscapes on weekends",
      ["watercolor landscapes", "art hobby painting", "watercolour landscapse"],
    ],
  ],
  [
    ["Prefers green tea over coffee", ["green tea coffee", "favourite hot drink", "gren tea"]],
    ["Drinks three espressos a day", ["espressos a day", "caffeine habit", "expressos"]],
  ],
  [
    ["Listens to jazz while working", ["jazz working", "music taste saxophone", "jaz music"]],
    ["Goes to heavy metal concerts", ["heavy metal concerts", "loud rock shows", "heavy metall concerts"]],
  ],
  [
    ["Runs a marathon every autumn", ["marathon autumn", "long distance running race", "marathn"]],
    ["Swims laps at the pool before work", ["swims pool", "swimming exercise morning", "swimms laps"]],
  ],
  [
    ["Is allergic to peanuts", ["allergic peanuts", "nut allergy", "alergic peanuts"]],
    ["Has a severe allergy to penicillin", ["penicillin allergy", "antibiotic reaction", "penicilin"]],
  ],
  [
    [
      "Travels to Japan every spring for the cherry blossoms",
      ["Japan cherry blossoms", "trip to Tokyo sakura", "Japn cherry"],
    ],
    ["Spends summer holidays camping in Norway", ["camping Norway", "outdoor vacation fjords", "campng Norway"]],
  ],
  [
    ["Drives an old red Volvo", ["red Volvo", "car vehicle", "Volovo"]],
    ["Commutes by bicycle every day", ["commutes bicycle", "rides a bike to the office", "bycicle commute"]],
  ],
  [
    ["Speaks fluent Portuguese and Spanish", ["Portuguese Spanish", "languages spoken", "Portugese"]],
    ["Is learning Mandarin Chinese", ["learning Mandarin", "studies Chinese language", "Mandrin"]],
  ],
  [
    ["Has two daughters in primary school", ["daughters school", "children kids", "dauhgters"]],
    ["Takes care of an elderly mother", ["elderly mother", "looks after parent", "elderley mother"]],
  ],
  [
    ["Prefers meetings in the morning before ten", ["meetings morning", "early schedule calls", "meetngs morning"]],
    ["Works night shifts on weekends", ["night shifts weekends", "evening work schedule", "nigth shifts"]],
  ],
  [
    ["Is reading a biography of Marie Curie", ["biography Marie Curie", "book about a scientist", "Curie biografy"]],
    ["Loves detective novels by Agatha Christie", ["Agatha Christie novels", "mystery books", "Agata Christie"]],
  ],
  [
    ["Uses a Linux laptop for everything", ["Linux laptop", "computer operating system", "Linx laptop"]],
    ["Is switching from Android to an iPhone", ["Android iPhone", "new mobile phone", "iPhon switch"]],
  ],
];

/** Extra words for the fake embedder: paraphrase words map to the key word of their memory. */
export const similar: string[][] = [
  ["vegetarian", "animals", "meat"],
  ["keto", "carb"],
  ["retriever", "puppy", "dog"],
  ["cats", "kittens"],
  ["lisbon", "portugal"],
  ["berlin", "germany", "relocated"],
  ["nurse", "healthcare"],
  ["software", "programmer"],
  ["piano", "keyboard"],
  ["watercolor", "painting", "art"],
  ["tea", "drink"],
  ["espressos", "caffeine"],
  ["jazz", "saxophone"],
  ["metal", "rock"],
  ["marathon", "running"],
  ["swims", "swimming"],
  ["peanuts", "nut"],
  ["penicillin", "antibiotic"],
  ["japan", "tokyo", "sakura"],
  ["camping", "outdoor", "fjords"],
  ["volvo", "car", "vehicle"],
  ["bicycle", "bike"],
  ["portuguese", "languages"],
  ["mandarin", "chinese"],
  ["daughters", "children", "kids"],
  ["mother", "parent"],
  ["meetings", "calls", "early"],
  ["night", "evening"],
  ["curie", "scientist"],
  ["christie", "mystery"],
  ["linux", "computer"],
  ["iphone", "phone", "mobile"],
];

export interface SearchSet {
  memories: { id: string; entity: string; content: string }[];
  queries: { entity: string; query: string; kind: "words" | "paraphrase" | "typo"; relevant: string[] }[];
}

export function buildSet(): SearchSet {
  const memories: SearchSet["memories"] = [];
  const queries: SearchSet["queries"] = [];
  for (let e = 0; e < 20; e++) {
    const entity = `user-${String(e + 1).padStart(2, "0")}`;
    const ids: string[] = [];
    const asked: [string, string, string][] = [];
    topics.forEach((variants, t) => {
      const [content, qs] = variants[(e + t) % variants.length];
      const id = `m-${String(e + 1).padStart(2, "0")}-${String(t + 1).padStart(2, "0")}`;
      memories.push({ id, entity, content });
      ids.push(id);
      asked.push(qs);
    });
    // Three queries per entity, on three different topics.
    const kinds = ["words", "paraphrase", "typo"] as const;
    kinds.forEach((kind, k) => {
      const t = (e * 5 + k * 7) % topics.length;
      queries.push({ entity, query: asked[t][k], kind, relevant: [ids[t]] });
    });
  }
  return { memories, queries };
}

if (import.meta.main) {
  const set = buildSet();
  writeFileSync(join(import.meta.dir, "search-set.json"), `${JSON.stringify({ similar, ...set }, null, 1)}\n`);
  console.log(`wrote bench/search-set.json: ${set.memories.length} memories, ${set.queries.length} queries`);
}
