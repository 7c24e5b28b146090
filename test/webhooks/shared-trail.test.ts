// The newest stretch of the trail, read once for every subscription (src/webhooks/shared-trail.ts),
// on a store of the test's own and a clock of its own, so every step is exact: while commits come
// back to back (PostgreSQL, stores at full speed) the stretch is read at most every streakMs; a
// commit after a pause is read at once.
import { expect, test } from "bun:test";
import type { EventRecord } from "../../src/storage/records";
import type { TrailFilter } from "../../src/storage/storage";
import { SharedTrail } from "../../src/webhooks/shared-trail";

const everything: TrailFilter = { namespaces: ["*"], kinds: [] };

function setup(streakMs: number) {
  const t = { now: 1000, reads: 0, events: [] as EventRecord[] };
  const storage = {
    async trailAfter(after: number, _filter: TrailFilter, limit: number) {
      t.reads++;
      const events = t.events.filter((e) => e.seq > after).slice(0, limit);
      return {
        events,
        erasures: [],
        scannedTo: events.length === limit ? events[events.length - 1].seq : t.events.length,
      };
    },
  };
  const trail = new SharedTrail(
    storage,
    5,
    () => 0,
    streakMs,
    () => t.now,
  );
  /** A commit of one event: in the store, and told to the trail. */
  const commit = () => {
    const seq = t.events.length + 1;
    t.events.push({ seq, namespace: "a", event: "ADD", memoryId: `m${seq}` } as EventRecord);
    trail.committed();
  };
  const seqs = async (pos = 0) => (await trail.after(pos, everything, 100)).events.map((e) => e.seq);
  return { t, trail, commit, seqs };
}

test("commits back to back: the stretch is read at most every streakMs, then with all of them", async () => {
  const { t, commit, seqs } = setup(25);
  commit();
  expect(await seqs()).toEqual([1]);
  t.now += 30; // after a pause: read at once
  commit();
  expect(await seqs()).toEqual([1, 2]);
  expect(t.reads).toBe(2);
  // The reads came 30 ms apart, within twice 25: a streak. Commits within 25 ms of the last read wait.
  t.now += 5;
  commit();
  expect(await seqs()).toEqual([1, 2]);
  t.now += 10;
  commit();
  expect(await seqs()).toEqual([1, 2]);
  expect(t.reads).toBe(2);
  t.now += 10; // 25 ms after the last read began
  expect(await seqs()).toEqual([1, 2, 3, 4]);
  expect(t.reads).toBe(3);
  // A pause of more than twice 25 ms ends the streak: the next commit is read at once.
  t.now += 60;
  commit();
  expect(await seqs(4)).toEqual([5]);
  expect(t.reads).toBe(4);
});

test("a commit put off by a streak says when it is read (unreadDueIn): a caller that found nothing sleeps no longer", async () => {
  const { t, trail, commit, seqs } = setup(25);
  commit();
  expect(await seqs()).toEqual([1]);
  t.now += 30;
  commit();
  expect(await seqs()).toEqual([1, 2]);
  expect(trail.unreadDueIn()).toBeUndefined();
  // The burst's last commit, within the streak: not read now, and due 25 ms after the last read began.
  t.now += 5;
  commit();
  expect(await seqs()).toEqual([1, 2]);
  expect(trail.unreadDueIn()).toBe(20);
  t.now += 20;
  expect(trail.unreadDueIn()).toBe(0);
  expect(await seqs()).toEqual([1, 2, 3]);
  expect(trail.unreadDueIn()).toBeUndefined();
  expect(t.reads).toBe(3);
});

test("streakMs 0 (LMDB): every commit is read at once", async () => {
  const { t, commit, seqs } = setup(0);
  for (let i = 1; i <= 5; i++) {
    t.now += 1;
    commit();
    expect(await seqs()).toEqual(Array.from({ length: i }, (_, k) => k + 1));
  }
  expect(t.reads).toBe(5);
  // No commit since, within freshMs: nothing read.
  expect(await seqs()).toEqual([1, 2, 3, 4, 5]);
  expect(t.reads).toBe(5);
});
