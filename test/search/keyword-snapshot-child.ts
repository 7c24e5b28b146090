// Child process of keyword-snapshot.test.ts: stores memories, searches (so the namespace's
// keyword snapshot is written), then goes on storing, deleting and merging, printing each
// acknowledged change, and kills itself with SIGKILL in the middle of a write, while a second
// save (begun after a few dozen changes) waits between its pieces.
import { existsSync, readdirSync } from "node:fs";
import { packing } from "../../src/index/keyword";
import { openLmdb } from "../../src/storage/lmdb/index";
import { snapshotting } from "../../src/storage/lmdb/keyword-cache";
import { snapshotDir } from "../../src/storage/lmdb/keyword-snapshot";
import { deferring } from "../../src/storage/lmdb/touched";
import { queryTerms } from "../../src/text/tokens";
import { seededRandom } from "../helpers";

const dir = process.argv[2];
const ns = "snap";
const rand = seededRandom(77);
const vocab = "tea coffee cafe dog cat lisbon paris nurse piano runs daily vegan meat sails boat red blue green".split(
  " ",
);
packing.upTo = 0; // (lists, as the parent's: a snapshot is written)
// Each commit followed at once (not in batches): the saves below begin after a count of changes.
deferring.batch = 1;
const s = await openLmdb(dir);
const add = (i: number, word?: string) => ({
  event: "ADD" as const,
  create: {
    id: Bun.randomUUIDv7(),
    namespace: ns,
    entity: `e${i % 3}`,
    content: `${vocab[Math.floor(rand() * vocab.length)]} ${vocab[Math.floor(rand() * vocab.length)]} ${word ?? ""}`,
    category: "fact",
    importance: 0.5,
  },
});
await s.apply(
  Array.from({ length: 300 }, (_, i) => add(i)),
  null,
);
await s.keywordSearch({ namespace: ns }, queryTerms("tea"), {}, 5);
// (Written a piece at a time: in place once the .bin is there and no .tmp is left.)
const written = () => {
  const files = existsSync(snapshotDir(dir)) ? readdirSync(snapshotDir(dir)) : [];
  return files.some((f) => f.endsWith(".bin")) && !files.some((f) => f.endsWith(".tmp"));
};
for (let i = 0; i < 500 && !written(); i++) await Bun.sleep(10);
console.log("snapshot written");
// The next save begins after 20 changes (and a tenth of the namespace) and never gets past its first piece.
let saving = false;
snapshotting.after = 20;
snapshotting.turnMs = 0;
snapshotting.between = () => {
  saving = true;
  return new Promise(() => {});
};
const live: { id: string; word: string }[] = [];
for (let i = 0; ; i++) {
  const word = `uniq${i}x`;
  const x = rand();
  if (x < 0.2 && live.length > 3) {
    const [m] = live.splice(Math.floor(rand() * live.length), 1);
    await s.apply([{ event: "DELETE", target: m.id, reason: "test" }], null);
    console.log(`deleted ${m.id} ${m.word}`);
  } else if (x < 0.35 && live.length > 3) {
    // A merge gives a memory a new word: the old one must no longer find it.
    const m = live[Math.floor(rand() * live.length)];
    await s.apply([{ event: "MERGE", target: m.id, patch: { content: `merged ${word}` } }], null);
    console.log(`deleted ${m.id} ${m.word}`);
    m.word = word;
    console.log(`acked ${m.id} ${word}`);
  } else {
    const op = add(i, word);
    const [d] = await s.apply([op], null);
    live.push({ id: d!.memory.id, word });
    console.log(`acked ${d!.memory.id} ${word}`);
  }
  // Killed in the middle of a write (not yet acknowledged) after some progress.
  if (i === 60) {
    if (saving) console.log("second save under way");
    void s.apply([add(i + 1, "never-acked")], null);
    process.kill(process.pid, "SIGKILL");
  }
}
