// Stages the search index's changes in a write transaction and notes what they touched, so the
// in-memory lists and vectors can follow the commit. Apart from search.ts, so that the built-in
// embedder's thread (vectors-elsewhere.ts), which writes vectors, does not load the keyword
// engine and its languages.
import { normalized } from "../ops";
import type { MemoryRecord } from "../records";
import type { VectorUpdate } from "../storage";
import { nextCommitOrder } from "./commit-order";
import { type Dbs, keys } from "./layout";
import type { Writes } from "./staging";
import type { Touched } from "./touched";

/**
 * Stages index changes for one write transaction and notes what they touched, so the in-memory
 * lists and vectors can follow the commit.
 */
export class IndexWriter {
  private static collecting: IndexWriter[] | undefined;
  /** Runs `fn` (synchronous), adding every IndexWriter it makes to `into`. */
  static collect<T>(into: IndexWriter[], fn: () => T): T {
    const outer = IndexWriter.collecting;
    IndexWriter.collecting = into;
    try {
      return fn();
    } finally {
      IndexWriter.collecting = outer;
    }
  }
  /** The memories whose keyword index this transaction changed, for keyword-cache.ts. */
  readonly keywordTouched: [string, string, string][] = [];
  /**
   * Its place in commit order: every IndexWriter is made inside an LMDB transaction callback,
   * and LMDB runs those one at a time, in the order they commit (NamespaceCache.refresh).
   */
  readonly order = nextCommitOrder();
  /**
   * The records of the memories this transaction created (new ids), by id; handed to the
   * keyword lists with keywordTouched once committed, if `applied`: its writes were applied
   * (a plan that threw applied none).
   */
  readonly created = new Map<string, MemoryRecord>();
  applied = false;
  /** The vector keys this transaction wrote or removed, for the in-memory vectors (vector-cache.ts). */
  readonly vectorsTouched: [string, string, string][] = [];
  /**
   * What it wrote there, by memory id: the key and its last value (undefined: removed), or null
   * when it wrote more than one key of the memory; handed to the vectors with vectorsTouched once
   * committed, if `applied` (NamespaceCache.refresh).
   */
  readonly vectorsWritten = new Map<string, [Touched, Float32Array | undefined] | null>();
  /**
   * `follow` false (bench/search.ts's index-off baseline only): the in-memory lists are not told
   * of the change.
   */
  constructor(
    private readonly dbs: Dbs,
    private readonly w: Writes,
    private readonly follow = true,
  ) {
    IndexWriter.collecting?.push(this);
  }

  /**
   * Lists (sign 1) or unlists (sign -1) a current memory in namespace_memories. Its terms are
   * not stored: the in-memory lists tokenize its record when they load or follow it.
   */
  private change(r: MemoryRecord, sign: 1 | -1) {
    const key = keys.namespaceMemory(r.namespace, r.id);
    if (sign < 0) this.w.remove(this.dbs.namespaceMemories, key);
    else this.w.put(this.dbs.namespaceMemories, key, null);
    if (this.follow) this.keywordTouched.push([r.namespace, r.entity, r.id]);
  }

  /** Indexes a current memory's content. */
  add(r: MemoryRecord) {
    this.change(r, 1);
  }
  /** Unindexes a memory's content as it was indexed. */
  remove(r: MemoryRecord) {
    this.change(r, -1);
  }

  /** Applies an op's vector to a memory that is (still) current. */
  setVector(r: MemoryRecord, v: VectorUpdate | undefined) {
    const key = keys.vector(r.namespace, r.entity, r.id);
    if (v === "pending") {
      this.w.remove(this.dbs.vectors, key);
      this.w.put(this.dbs.embedPending, r.id, null);
      this.wrote(r, undefined);
    } else {
      this.w.remove(this.dbs.embedPending, r.id);
      if (v === undefined) {
        this.w.remove(this.dbs.vectors, key);
        this.wrote(r, undefined);
      } else {
        const n = normalized(v);
        this.w.put(this.dbs.vectors, key, Buffer.from(n.buffer));
        this.wrote(r, n);
      }
    }
  }

  /** Drops a retired memory's vector and queue entry. */
  dropVector(r: MemoryRecord) {
    this.w.remove(this.dbs.vectors, keys.vector(r.namespace, r.entity, r.id));
    this.w.remove(this.dbs.embedPending, r.id);
    this.wrote(r, undefined);
  }

  private wrote(r: MemoryRecord, v: Float32Array | undefined) {
    const key: [string, string, string] = [r.namespace, r.entity, r.id];
    this.vectorsTouched.push(key);
    const had = this.vectorsWritten.get(r.id);
    const same = had === undefined || (had !== null && had[0][0] === key[0] && had[0][1] === key[1]);
    this.vectorsWritten.set(r.id, same ? [key, v] : null);
  }
}

/**
 * Keeps the index in step with one planned change: `before` is the memory as it was (undefined
 * for a new one), `after` as it is now, `vector` what the op says about its embedding.
 */
export function indexChange(
  ix: IndexWriter,
  before: MemoryRecord | undefined,
  after: MemoryRecord,
  vector: VectorUpdate | undefined,
) {
  const was = before?.state === "current";
  const is = after.state === "current";
  const changed = !was || !is || before!.content !== after.content;
  if (!changed) return;
  if (was) ix.remove(before!);
  if (is) {
    ix.add(after);
    if (was || vector !== undefined) ix.setVector(after, vector);
  } else if (was) ix.dropVector(before!);
}
