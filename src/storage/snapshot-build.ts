// Which build wrote a search snapshot (LMDB's files, PostgreSQL's rows): the terms of a text
// depend on the tokenizer, stemmers and stop words of the release, so a snapshot of another build
// is not used; from source, a sample's terms stand in for the release.
import { commit, version } from "../build-info";
import { termCounts } from "../text/tokens";

let stamp: string | undefined;

/** This build's stamp: its version and commit, and the hash of a sample text's terms. */
export const snapshotBuild = () =>
  (stamp ??= `${version}+${commit}:${Bun.hash(JSON.stringify(sampleTerms())).toString(16)}`);

/** A sample text's terms as src/index/keyword/space.ts packs them (packTerms(sample, 0, "")). */
function sampleTerms(): (string | number)[] {
  const sample =
    "The runners were running to the cafés of Straße Lisbon, 北京烤鸭 and ümlauts; les enfants mangeaient des pommes 2024";
  const { tf, length } = termCounts(sample);
  const v: (string | number)[] = [length, 0, ""];
  for (const [term, n] of tf) v.push(term, n);
  return v;
}
