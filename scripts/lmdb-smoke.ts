// Smoke test for the compiled binary: `lmdb-smoke <dir>` opens an LMDB env in <dir>,
// writes and reads tuple keys, and prints OK. Exercises lmdb's native addon end to end.
import { open } from "lmdb";
import { commit, version } from "../src/build-info";

const t0 = performance.now();
const dir = process.argv[2];
if (!dir) {
  console.error("usage: lmdb-smoke <dir>");
  process.exit(2);
}

const root = open({ path: dir });
const db = root.openDB<{ v: number; text: string }, (string | number)[]>({
  name: "facts",
});

for (let i = 1; i <= 100; i++) db.put(["ns", "entity", i], { v: i, text: `fact ${i}` });
await db.flushed;

const got = db.get(["ns", "entity", 42]);
if (got?.v !== 42 || got.text !== "fact 42") throw new Error(`bad value: ${JSON.stringify(got)}`);

// Range over the tuple prefix: ordered-binary keeps [ns, entity, n] sorted by n.
const keys = [...db.getKeys({ start: ["ns", "entity", 10], end: ["ns", "entity", 20] })];
if (keys.length !== 10 || keys[0]?.[2] !== 10) throw new Error(`bad range: ${JSON.stringify(keys)}`);

await db.transaction(() => db.remove(["ns", "entity", 1]));
if (db.get(["ns", "entity", 1]) !== undefined) throw new Error("remove failed");

await root.close();
console.log(`OK memd ${version} (${commit}) ${(performance.now() - t0).toFixed(1)}ms`);
