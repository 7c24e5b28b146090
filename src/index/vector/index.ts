// The vector engine as a backend uses it: a namespace's vectors as binary codes and the
// approximate search over them, the 4-bit copy that ranks their candidates again, and the top-k
// pick over scores. Backends import this file only.
export { exactReads, FourBit } from "./four-bit";
export {
  ann,
  compaction,
  type FrozenVectors,
  type Nearest,
  type ReadVector,
  type RowKeeper,
  type VectorHeader,
  VectorSpace,
  xorshift,
} from "./space";
export { topIndexes } from "./top";
