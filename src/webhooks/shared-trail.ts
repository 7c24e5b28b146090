// The newest stretch of the trail, read once for every subscription this process delivers: ten
// subscriptions woken by one commit make one read of storage, not ten (each read decodes every
// event it passes, wanted or not). A subscription whose position is within the stretch is
// answered from it, filtered as storage filters; one further back (a backlog, a replay) or
// ahead reads storage itself.
import type { EventRecord } from "../storage/records";
import type { TrailErasure, TrailFilter, Webhooks } from "../storage/storage";
import { inNamespaces, matchesTrail } from "../storage/trail-filter";
import { isErasure, type TrailItem } from "./service";

type Page = { events: EventRecord[]; erasures: TrailErasure[]; scannedTo: number };

/** Every namespace, every kind. */
const everything: TrailFilter = { namespaces: ["*"], kinds: [] };
/** Items read from storage at once, and kept at most. */
const readLimit = 1000;
const keptItems = 10_000;

export class SharedTrail {
  /** Every event and erasure with from < seq <= to, in seq order. */
  private items: TrailItem[] = [];
  private from = 0;
  private to = -1;
  /** Commits seen (wakes), and the count when the read in flight or last began, and when (ms). */
  private commits = 0;
  private readCommits = -1;
  private readStartedAt = Number.NEGATIVE_INFINITY;
  private reading: Promise<void> | undefined;

  /** `freshMs`: a stretch read longer ago than this is read again, commits seen or not (another replica's). */
  constructor(
    private readonly storage: Pick<Webhooks, "trailAfter">,
    private readonly freshMs: number,
  ) {}

  /** This process committed: the next read goes to storage. */
  committed() {
    this.commits++;
  }

  /** As storage.trailAfter: the matching events and erasures after `pos` (at most `limit` events), and how far it looked. */
  async after(pos: number, filter: TrailFilter, limit: number): Promise<Page> {
    if (this.to < 0) {
      this.from = pos;
      this.to = pos;
    }
    if (pos < this.from) return this.storage.trailAfter(pos, filter, limit);
    await this.refresh();
    if (pos < this.from || pos > this.to) return this.storage.trailAfter(pos, filter, limit);
    return this.page(pos, filter, limit);
  }

  /** Reads what was committed since the stretch was read, unless a read begun since the last commit is in flight or just done. */
  private async refresh() {
    for (;;) {
      const current = this.readCommits === this.commits && performance.now() - this.readStartedAt < this.freshMs;
      if (this.reading) {
        await this.reading;
        if (current) return;
        continue;
      }
      if (current) return;
      this.readCommits = this.commits;
      this.readStartedAt = performance.now();
      this.reading = this.read().finally(() => {
        this.reading = undefined;
      });
    }
  }

  private async read() {
    const page = await this.storage.trailAfter(this.to, everything, readLimit);
    const more =
      page.erasures.length === 0 ? page.events : [...page.events, ...page.erasures].sort((a, b) => a.seq - b.seq);
    for (const item of more) this.items.push(item);
    this.to = Math.max(this.to, page.scannedTo);
    if (this.items.length > keptItems) {
      const dropped = this.items.splice(0, this.items.length - keptItems);
      this.from = dropped[dropped.length - 1].seq;
    }
  }

  private page(pos: number, filter: TrailFilter, limit: number): Page {
    const events: EventRecord[] = [];
    const erasures: TrailErasure[] = [];
    let scannedTo = this.to;
    for (let i = this.firstAfter(pos); i < this.items.length; i++) {
      const item = this.items[i];
      if (isErasure(item)) {
        if (inNamespaces(filter, item.namespace)) erasures.push(item);
      } else if (matchesTrail(filter, item)) {
        if (events.length === limit) {
          scannedTo = this.items[i - 1].seq;
          break;
        }
        events.push(item);
      }
    }
    return { events, erasures, scannedTo };
  }

  /** The index of the first item with a seq above `pos`. */
  private firstAfter(pos: number) {
    let lo = 0;
    let hi = this.items.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (this.items[mid].seq <= pos) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }
}
