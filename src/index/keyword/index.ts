// The keyword engine as a backend uses it: a namespace's space of documents (add, remove, trim),
// BM25 top-k over it, and its snapshot (freeze, fromParts). Backends import this file only.

export { keywordSearch } from "./search";
export type { FrozenSpace, Piece, SpaceParts } from "./snapshot";
export { type DocTerms, KeywordSpace, packing, packTerms } from "./space";
export { type Accept, type Hit, maxScoreStats, maxScoreTuning } from "./walk";
