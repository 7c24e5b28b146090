// The place of this thread's LMDB write transactions in commit order: each IndexWriter takes the
// next number inside its transaction callback, and LMDB runs those one at a time, in the order
// they commit (NamespaceCache.refresh decides by it). A module of its own so that the caches can
// read it without importing the writer.
let made = 0;

/** The order of a write transaction being made now. */
export const nextCommitOrder = () => ++made;

/** The order of the newest write transaction made so far. */
export const latestCommitOrder = () => made;
