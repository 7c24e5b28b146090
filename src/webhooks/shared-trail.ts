// The newest stretch of the trail, read once for every subscription this process delivers: ten
// subscriptions woken by one commit make one read of storage, not ten (each read decodes every
// event it passes, wanted or not). A subscription whose position is within the stretch is
// answered from it, filtered as storage filters; one further back (a backlog, a replay) or
// ahead reads storage itself. Each page says when its oldest item was read from storage, and a
// scrubbing commit of this process (an erasure) drops the stretch: a page's items are as they
// were then (deliverer.ts reads them again when that is too long ago).
import type { EventRecord } from "../storage/records";
import type { TrailErasure, TrailFilter, Webhooks } from "../storage/storage";
import { inNamespaces, matchesTrail } from "../storage/trail-filter";
import { isErasure, type TrailItem } from "./service";

/** As storage.trailAfter's, with `readAt`: when the read of its oldest item began (performance.now()). */
export type Page = { events: EventRecord[]; erasures: TrailErasure[]; scannedTo: number; readAt: number };

/** Every namespace, every kind. */
const everything: TrailFilter = { namespaces: ["*"], kinds: [] };
/** Items read from storage at once, and kept at most. */
const readLimit = 1000;
const keptItems = 10_000;

export class SharedTrail {
  /** Every event and erasure with from < seq <= to, in seq order. */
  private items: TrailItem[] = [];
  /** When the read that brought each item began (ascending, as the items). */
  private times: number[] = [];
  private from = 0;
  private to = -1;
  /** Commits seen (wakes), and the count when the read in flight or last began, and when (ms). */
  private commits = 0;
  private readCommits = -1;
  private readStartedAt = Number.NEGATIVE_INFINITY;
  /** The time between the last two reads' starts (ms). */
  private lastGap = Number.POSITIVE_INFINITY;
  private reading: Promise<void> | undefined;
  private scrubsSeen: number;

  /**
   * `freshMs`: a stretch read longer ago than this is read again, commits seen or not (another
   * replica's). `scrubs`: this process's count of scrubbing commits, as soon as each is made.
   * `streakMs`: while reads follow each other within twice this (commits coming back to back:
   * stores at full speed), the next waits until this long after the last one began, whatever was
   * committed meanwhile; a commit after a pause is read at once (0: always at once).
   */
  constructor(
    private readonly storage: Pick<Webhooks, "trailAfter">,
    private readonly freshMs: number,
    private readonly scrubs: () => number,
    private readonly streakMs = 0,
    private readonly now: () => number = () => performance.now(),
  ) {
    this.scrubsSeen = scrubs();
  }

  /** This process committed: the next read goes to storage. */
  committed() {
    this.commits++;
  }

  /** As storage.trailAfter: the matching events and erasures after `pos` (at most `limit` events), and how far it looked. */
  async after(pos: number, filter: TrailFilter, limit: number): Promise<Page> {
    const scrubs = this.scrubs();
    if (scrubs !== this.scrubsSeen) {
      // A read in flight began before: what it brings is dropped too (readMore).
      this.scrubsSeen = scrubs;
      this.items = [];
      this.times = [];
      this.to = -1;
      this.readCommits = -1;
    }
    if (this.to < 0) {
      this.from = pos;
      this.to = pos;
    }
    if (pos < this.from) return this.read(pos, filter, limit);
    await this.refresh();
    if (pos < this.from || pos > this.to) return this.read(pos, filter, limit);
    return this.page(pos, filter, limit);
  }

  /**
   * When commits seen wait for the next read (a streak puts it off, refresh): the ms until that
   * read is due, 0 if it is; undefined when every commit seen is read or being read. A caller that
   * found nothing sleeps no longer than this: the burst's last commit wakes it once only.
   */
  unreadDueIn(): number | undefined {
    if (this.readCommits === this.commits) return undefined;
    return Math.max(0, this.readStartedAt + this.streakMs - this.now());
  }

  /** Storage's page, for a position outside the stretch. */
  private async read(pos: number, filter: TrailFilter, limit: number): Promise<Page> {
    const readAt = this.now();
    return { ...(await this.storage.trailAfter(pos, filter, limit)), readAt };
  }

  /**
   * Reads what was committed since the stretch was read, unless a read begun since the last
   * commit is in flight or just done, or (a streak) the last one began under streakMs ago.
   */
  private async refresh() {
    for (;;) {
      const since = this.now() - this.readStartedAt;
      const early = this.lastGap < 2 * this.streakMs && since < this.streakMs;
      const current = early || (this.readCommits === this.commits && since < this.freshMs);
      if (this.reading) {
        await this.reading;
        if (current) return;
        continue;
      }
      if (current) return;
      this.readCommits = this.commits;
      this.lastGap = since;
      this.readStartedAt = this.now();
      this.reading = this.readMore().finally(() => {
        this.reading = undefined;
      });
    }
  }

  private async readMore() {
    const at = this.now();
    const scrubs = this.scrubsSeen;
    const page = await this.storage.trailAfter(this.to, everything, readLimit);
    if (scrubs !== this.scrubsSeen) return;
    const more =
      page.erasures.length === 0 ? page.events : [...page.events, ...page.erasures].sort((a, b) => a.seq - b.seq);
    for (const item of more) {
      this.items.push(item);
      this.times.push(at);
    }
    this.to = Math.max(this.to, page.scannedTo);
    if (this.items.length > keptItems) {
      const dropped = this.items.splice(0, this.items.length - keptItems);
      this.times.splice(0, dropped.length);
      this.from = dropped[dropped.length - 1].seq;
    }
  }

  private page(pos: number, filter: TrailFilter, limit: number): Page {
    const events: EventRecord[] = [];
    const erasures: TrailErasure[] = [];
    let scannedTo = this.to;
    const first = this.firstAfter(pos);
    const readAt = this.times[first] ?? this.now();
    for (let i = first; i < this.items.length; i++) {
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
    return { events, erasures, scannedTo, readAt };
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
