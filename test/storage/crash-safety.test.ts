// Crash safety, proven: a 2xx store survives SIGKILL at any moment (3 rounds here; 20 in make bench).
import { afterAll, beforeAll, expect, test } from "bun:test";
import { join } from "node:path";
import { buildBinary } from "../binary-helpers";
import { crashRound } from "../crash-run";
import { tempDir } from "../helpers";

const tmp = tempDir("memd-crash-");
let bin: string;
beforeAll(() => {
  bin = buildBinary(join(tmp.dir, "memd"));
}, 120_000);
afterAll(() => tmp.cleanup());

test.each([1, 2, 3])(
  "round %d: 32 writers, SIGKILL at a random moment, restart: every 2xx store is there with its ADD event",
  async (round) => {
    // Rounds share one data dir (each restart reopens what earlier kills left), one namespace each.
    const r = await crashRound(bin, join(tmp.dir, "data"), { namespace: `crash-${round}` });
    expect(r.problems).toEqual([]);
    expect(r.acked).toBeGreaterThan(0);
    expect(r.found).toBeGreaterThanOrEqual(r.acked);
  },
  60_000,
);
