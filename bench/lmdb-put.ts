// Micro-benchmark of lmdb-js itself under Bun: CPU µs per putSync inside write transactions of
// 64 × 7 puts (a raw store's count), by key shape, and for one sub-database with number keys.
// What a store's 7 puts cost before memd does anything with them. `bun run bench/lmdb-put.ts`.
import { mkdtempSync, rmSync } from "node:fs";
import { type Database, open } from "lmdb";

const value = { content: "The user prefers green tea in the morning", seq: 0, entity: "user-1" };
const variants: Record<string, (db: Database, id: string, seq: number) => void> = {
  "tuple key, null value": (db, id, seq) => db.putSync(["ns", id, seq], null),
  "string key, null value": (db, id) => db.putSync(id, null),
  "number key, null value": (db, _id, seq) => db.putSync(seq, null),
  "tuple key, small record": (db, id, seq) => db.putSync(["ns", id, seq], value),
};

async function measure(dbCount: number, put: (db: Database, id: string, seq: number) => void) {
  const dir = mkdtempSync("/dev/shm/memd-lmdb-put-");
  const env = open({ path: dir, mapSize: 1 << 30, maxDbs: 16, overlappingSync: true });
  const dbs = Array.from({ length: dbCount }, (_, i) => env.openDB(`d${i}`, {}));
  let seq = 0;
  const per = 448 / dbCount;
  const batch = () => {
    for (let j = 0; j < per; j++) {
      seq++;
      const id = Bun.randomUUIDv7();
      for (const db of dbs) put(db, id, seq);
    }
  };
  for (let i = 0; i < 50; i++) env.transactionSync(batch);
  const n = 300;
  const c0 = process.cpuUsage();
  for (let i = 0; i < n; i++) env.transactionSync(batch);
  await env.flushed;
  const c = process.cpuUsage(c0);
  await env.close();
  rmSync(dir, { recursive: true, force: true });
  return (c.user + c.system) / (n * 448);
}

for (const [name, put] of Object.entries(variants))
  console.log(`7 sub-databases, ${name}: ${(await measure(7, put)).toFixed(2)} µs CPU per put`);
console.log(
  `1 sub-database, number key, null value: ${(await measure(1, variants["number key, null value"])).toFixed(2)} µs CPU per put`,
);
