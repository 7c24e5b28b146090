// Deliveries give way to stores on a busy machine (src/webhooks/pace.ts): with a clock of the
// test's own (time, the thread's CPU, the machine's CPU pressure), so every step is exact.
import { expect, test } from "bun:test";
import { Pace } from "../../src/webhooks/pace";

function setup(share: number, stalledUs: (() => number | undefined) | undefined = undefined) {
  const t = { now: 1000, cpu: 0, commits: 0, stalled: 0 };
  const pace = new Pace(() => t.commits, share, {
    now: () => t.now,
    cpuMs: () => t.cpu,
    stalledUs: stalledUs ?? (() => t.stalled),
  });
  return { t, pace };
}

test("while stores come on a contended CPU, a quarter of a core, then a wait for the next 10 ms", () => {
  const { t, pace } = setup(0.25);
  // The first look at the pressure only starts the count: not yet contended.
  t.commits++;
  expect(pace.wait()).toBe(0);
  // 100 ms on, tasks waited 50 ms of it: contended.
  t.now += 100;
  t.stalled += 50_000;
  t.commits++;
  expect(pace.wait()).toBe(0); // a new window
  t.now += 1;
  t.cpu += 2;
  expect(pace.wait()).toBe(0); // 2 ms of 2.5
  t.now += 1;
  t.cpu += 1;
  t.commits++;
  expect(pace.wait()).toBe(8); // 3 ms used: until the window's end
  t.now += 8;
  t.commits++;
  expect(pace.wait()).toBe(0); // the next window
});

test("no limit without stores, with idle CPU, or at a share of 1; where Linux does not say, it limits", () => {
  const quiet = setup(0.25);
  quiet.t.commits++;
  quiet.pace.wait();
  quiet.t.now += 100;
  quiet.t.stalled += 50_000;
  quiet.pace.wait();
  quiet.t.cpu += 9;
  quiet.t.now += 11; // no commit for longer than a window
  expect(quiet.pace.wait()).toBe(0);

  const idle = setup(0.25);
  for (let i = 0; i < 5; i++) {
    idle.t.commits++;
    idle.t.now += 100;
    idle.t.stalled += 1_000; // 1% of the time
    idle.t.cpu += 50;
    expect(idle.pace.wait()).toBe(0);
  }

  const free = setup(1);
  free.t.commits++;
  free.t.cpu += 100;
  expect(free.pace.wait()).toBe(0);

  const unknown = setup(0.25, () => undefined);
  unknown.t.commits++;
  expect(unknown.pace.wait()).toBe(0);
  unknown.t.now += 1;
  unknown.t.cpu += 3;
  unknown.t.commits++;
  expect(unknown.pace.wait()).toBe(9);
});
