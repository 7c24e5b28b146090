// @targets postgres
// A search snapshot replaced while a replica reads it (issue 32, storage/postgres/snapshots.ts):
// another replica writes the namespace's copy again between two of the parts being read, and the
// parts of the one being read are gone. The reader then reads the new snapshot instead of
// answering "none", on which its caller builds the copy from the rows (at a replica's start,
// before it is ready). Through the module's functions on a real database: the race needs a turn
// between two parts, which only the module's hook gives.
import { afterAll, expect, test } from "bun:test";
import { SQL } from "bun";
import { pgSnapshots, readSnapshot, writeSnapshot } from "../../src/storage/postgres/snapshots";
import { migratedDatabase } from "../helpers";

const { part, between } = pgSnapshots;
let sql: SQL | undefined;
afterAll(async () => {
  pgSnapshots.part = part;
  pgSnapshots.between = between;
  await sql?.close();
});
const db = <T>(fn: () => Promise<T>) => fn();

test("a snapshot replaced between two of its parts is read again: the new one, whole", async () => {
  const s = new SQL(await migratedDatabase());
  sql = s;
  pgSnapshots.part = 8; // 40 bytes: five parts
  const write = (fill: number, upto: number) =>
    writeSnapshot(s, "ns", "keyword", { upto, epoch: 0 }, [[0, new Uint8Array(40).fill(fill)]], { version: fill });
  expect(await write(1, 10)).toBe(true);

  let reading = false;
  let replaced = 0;
  pgSnapshots.between = async () => {
    if (reading && replaced === 0) {
      replaced++;
      expect(await write(2, 20)).toBe(true);
    }
    await between();
  };
  reading = true;
  const got = await readSnapshot<{ version: number }>(db, s, "ns", "keyword", 0);
  reading = false;
  expect(replaced).toBe(1);
  expect(got && { version: got.header.version, upto: got.upto, bytes: [...got.sections[0]] }).toEqual({
    version: 2,
    upto: 20,
    bytes: Array(40).fill(2),
  });
});
