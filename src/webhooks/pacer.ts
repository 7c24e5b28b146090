// Delivery yields to the request path. While this process commits writes (one within the last
// 50 ms) and its event loop runs behind (a 10 ms timer firing late by more than 1 ms, on
// average), its deliveries are held to `perCommit` for each commit (a delivery costs about a
// fifth of a raw store: bench/webhooks.ts); otherwise they go at full speed. So stores at full
// speed keep nearly all their throughput with subscriptions delivering every event, and what is
// held back is delivered as soon as the stores ease: later, never lost or reordered.

/** Late timer firings (ms, a moving average) above which the loop counts as behind. */
const behindMs = 1;
/** A commit this recent (ms) counts as the request path at work. */
const recentCommitMs = 50;
const tickMs = 10;
/** Once behind, the loop counts as busy this long (ms), so deliveries do not burst between two late ticks. */
const holdMs = 200;

export class DeliveryPacer {
  private lastCommitAt = Number.NEGATIVE_INFINITY;
  private lateMs = 0;
  private behindAt = Number.NEGATIVE_INFINITY;
  private expected = 0;
  private timer: ReturnType<typeof setInterval> | undefined;
  /** Deliveries allowed now while busy (earned by commits, at most `maxTokens`). */
  private tokens = 0;
  private readonly waiting: (() => void)[] = [];

  constructor(
    private readonly perCommit: number,
    private readonly maxTokens = 10,
  ) {}

  /** Watches the loop (while there is something to deliver). */
  start() {
    if (this.timer) return;
    this.expected = performance.now() + tickMs;
    this.timer = setInterval(() => {
      const now = performance.now();
      this.lateMs = this.lateMs * 0.7 + Math.max(0, now - this.expected) * 0.3;
      this.expected = now + tickMs;
      this.release();
    }, tickMs);
    this.timer.unref?.();
  }

  /** Stops watching; every delivery waiting goes. */
  stop() {
    clearInterval(this.timer);
    this.timer = undefined;
    this.lateMs = 0;
    this.behindAt = Number.NEGATIVE_INFINITY;
    this.release();
  }

  /** This process committed a write: one more delivery may go while busy. */
  committed() {
    this.lastCommitAt = performance.now();
    this.tokens = Math.min(this.maxTokens, this.tokens + this.perCommit);
    this.release();
  }

  /** Whether deliveries yield now: writes are committing and the loop was behind within the last 200 ms. */
  get busy() {
    const now = performance.now();
    if (now - this.lastCommitAt >= recentCommitMs) return false;
    if (this.lateMs > behindMs) this.behindAt = now;
    return now - this.behindAt < holdMs;
  }

  /** Resolves when a delivery may go: at once unless busy, else once a commit has earned it. */
  turn(): Promise<void> {
    if (this.waiting.length === 0 && this.take()) return Promise.resolve();
    return new Promise<void>((resolve) => this.waiting.push(resolve));
  }

  private take(): boolean {
    if (!this.busy) return true;
    if (this.tokens < 1) return false;
    this.tokens--;
    return true;
  }

  private release() {
    while (this.waiting.length > 0 && this.take()) this.waiting.shift()!();
  }
}
