// The built-in embedder's thread's side of the storage (embedding/embed-thread.ts): the one
// module of storage/ it imports, so that its second VM loads (and compiles) only the LMDB
// embedding queue's reads and vector writes, not every backend and the search engine.
export { embedPendingElsewhere } from "./lmdb/vectors-elsewhere";
