// Deliveries give way to stores on a busy machine. While the request thread commits and the
// machine's CPU is contended (tasks waiting to run: Linux's pressure stall information), the
// delivery thread uses at most `share` of a core: in each window it runs until it has used
// share × the window of its own CPU, then waits for the next. The idle scheduling class already
// puts it behind the request thread; this also leaves the rest to the processes no priority of
// this thread reaches (PostgreSQL's backends, which the stores wait on). What is not delivered
// meanwhile waits for the stores to pause, in order. Without stores, or with idle CPU, it runs
// freely.
import { readFileSync } from "node:fs";

/** The window (ms): the thread waits at most this long for its next turn. */
const windowMs = 10;
/** How often the machine's CPU pressure is read again (ms). */
const pressureEveryMs = 100;
/** The share of time some task waited for a CPU above which the machine counts as contended. */
const contendedAbove = 0.1;

/** This thread's CPU time so far (ms). */
const threadCpuMs = () => {
  const u = process.threadCpuUsage();
  return (u.user + u.system) / 1000;
};

/** Microseconds some task has waited for a CPU since boot (/proc/pressure/cpu), or undefined where Linux does not say. */
export function cpuStalledUs(): number | undefined {
  try {
    const total = /^some .*total=(\d+)/m.exec(readFileSync("/proc/pressure/cpu", "utf8"))?.[1];
    return total === undefined ? undefined : Number(total);
  } catch {
    return undefined;
  }
}

export interface PaceClock {
  /** performance.now() */
  now(): number;
  /** This thread's CPU time (ms). */
  cpuMs(): number;
  /** As cpuStalledUs. */
  stalledUs(): number | undefined;
}

const realClock: PaceClock = { now: () => performance.now(), cpuMs: threadCpuMs, stalledUs: cpuStalledUs };

export class Pace {
  private lastCommits = -1;
  private committedAt = Number.NEGATIVE_INFINITY;
  private windowAt = Number.NEGATIVE_INFINITY;
  private windowCpu = 0;
  private pressureAt = Number.NEGATIVE_INFINITY;
  private stalled: number | undefined;
  /** Where Linux does not say, as contended: the requests come first. */
  private contended = true;

  /** `commits`: the request thread's count of its commits; `share`: of a core (1: no limit). */
  constructor(
    private readonly commits: () => number,
    private readonly share: number,
    private readonly clock: PaceClock = realClock,
  ) {}

  /** How long to wait (ms) before the next delivery step: 0 to go on now. */
  wait(): number {
    if (this.share >= 1) return 0;
    const now = this.clock.now();
    const c = this.commits();
    if (c !== this.lastCommits) {
      this.lastCommits = c;
      this.committedAt = now;
    }
    if (now - this.committedAt > windowMs || !this.busy(now)) return 0;
    if (now - this.windowAt >= windowMs) {
      this.windowAt = now;
      this.windowCpu = this.clock.cpuMs();
      return 0;
    }
    if (this.clock.cpuMs() - this.windowCpu < this.share * windowMs) return 0;
    return this.windowAt + windowMs - now;
  }

  /** Resolves when the thread may take its next delivery step. */
  async turn(): Promise<void> {
    for (let ms = this.wait(); ms > 0; ms = this.wait()) await Bun.sleep(ms);
  }

  /** Whether tasks waited for a CPU more than `contendedAbove` of the time since the last read (read at most every pressureEveryMs). */
  private busy(now: number) {
    if (now - this.pressureAt < pressureEveryMs) return this.contended;
    const stalled = this.clock.stalledUs();
    if (stalled !== undefined && this.stalled !== undefined)
      this.contended = (stalled - this.stalled) / 1000 / (now - this.pressureAt) > contendedAbove;
    else if (stalled !== undefined) this.contended = false;
    this.stalled = stalled;
    this.pressureAt = now;
    return this.contended;
  }
}
