// The webhook deliverer's own thread (a Worker; thread.ts starts it). It opens the store for
// itself (LMDB's environment again, or a small PostgreSQL pool of its own) and runs deliverer.ts
// there: reading the trail, signing, POSTing and moving cursors cost the request thread nothing.
// The request thread only tells it of commits and of edits through the API, and answers when
// what was committed is durable (LMDB flushes the request thread's commits).
// First, as in main.ts: the compiled binary's LMDB addon loads through it.
import "../native-addon";
import { CommitNotifier } from "../audit/notify";
import type { LogLevel } from "../config/config";
import type { KeyRecord } from "../keys/model";
import type { Logger } from "../log";
import { openStorage, type StorageSettings } from "../storage/index";
import type { Storage } from "../storage/storage";
import { lowerThisThread, threadId } from "../thread-priority";
import { type DeliveryOptions, scanSpacingMs, startDeliverer, type WebhookCounts } from "./deliverer";

/** The request thread's messages. */
export type ToThread =
  | {
      type: "init";
      settings: StorageSettings;
      root: KeyRecord | undefined;
      options: DeliveryOptions;
      /** Added to the process's nice value for the thread; at 19 it also goes in the idle class where it may (thread-priority.ts; Linux; 0: as the process). */
      nice: number;
      /** The request thread's count of its commits, of its scrubbing ones, and of key revocations (shared memory; thread.ts). */
      commits: Int32Array;
    }
  /** A change through the API: the subscriptions are read again at once. */
  | { type: "edited" }
  | { type: "durable"; id: number }
  | { type: "stop" };

/** The thread's messages. */
export type FromThread =
  | { type: "log"; level: LogLevel; msg: string; fields?: Record<string, unknown> }
  | { type: "counts"; counts: [string, WebhookCounts][] }
  | { type: "durable"; id: number }
  | { type: "started" }
  | { type: "failed"; error: string }
  | { type: "stopped" };

declare const self: Worker;
const post = (m: FromThread) => self.postMessage(m);

let stop: (() => Promise<void>) | undefined;
/** The start in progress (opening the store), and whether a stop came meanwhile. */
let starting: Promise<void> | undefined;
let stopping = false;
let edited: (() => void) | undefined;
const durableWaits = new Map<number, () => void>();
let nextDurable = 0;

self.onmessage = async (event: MessageEvent<ToThread>) => {
  const m = event.data;
  if (m.type === "edited") edited?.();
  else if (m.type === "durable") {
    durableWaits.get(m.id)?.();
    durableWaits.delete(m.id);
  } else if (m.type === "stop") {
    stopping = true;
    // A stop while the store is still opening: the open ends first, then the store is closed
    // (not cut mid-open, its PostgreSQL pool left to the connections' timeouts).
    await starting?.catch(() => {});
    await stop?.();
    post({ type: "stopped" });
  } else if (m.type === "init") {
    try {
      // At the most (19), the idle class too: stores first, deliveries (and their delay) after.
      const idle = await lowerThisThread(m.nice, m.nice >= 19);
      post({
        type: "log",
        level: "info",
        msg: "webhook delivery thread started",
        fields: { thread: threadId(), idle },
      });
      starting = start(m);
      await starting;
      post({ type: "started" });
    } catch (e) {
      post({ type: "failed", error: String((e as Error)?.message ?? e) });
    }
  }
};

async function start(m: Extract<ToThread, { type: "init" }>) {
  // Lines are written by the request thread's logger (its level decides).
  const at = (level: LogLevel) => (msg: string, fields?: Record<string, unknown>) =>
    post({ type: "log", level, msg, fields });
  const logger: Logger = { debug: () => {}, info: at("info"), warn: at("warn"), error: at("error"), flush() {} };
  // Only the webhooks' roles are used: no search lists, no snapshots, five connections (ten
  // subscriptions catching up each read an event and write a cursor at a time).
  const opened = await openStorage({
    ...m.settings,
    dbPool: 5,
    pgKeywordLists: false,
    pgSnapshotFrom: 0,
    keywordPrebuild: 0,
    searchMemoryMb: 1,
    applicationName: "memd webhooks",
  });
  if (stopping) return opened.close();
  // What the request thread committed is durable once it says so (LMDB: its flush). One question
  // in flight at a time: the callers meanwhile share the next, asked once it is answered (so
  // after their call); ten subscriptions reading pages do not each cost the request thread a message.
  const ask = () =>
    new Promise<void>((resolve) => {
      const id = nextDurable++;
      durableWaits.set(id, resolve);
      post({ type: "durable", id });
    });
  let asking: Promise<void> | undefined;
  let queued: Promise<void> | undefined;
  const durable = (): Promise<void> => {
    if (!asking) {
      asking = ask().finally(() => {
        asking = undefined;
      });
      return asking;
    }
    queued ??= asking.then(() => {
      queued = undefined;
      return durable();
    });
    return queued;
  };
  const storage: Storage = Object.assign(Object.create(opened), { durable });
  const notifier = new CommitNotifier();
  let sent = "";
  const scrubs = () => Atomics.load(m.commits, 1);
  const deliverer = startDeliverer(
    {
      storage,
      notifier,
      logger,
      scrubs,
      commits: () => Atomics.load(m.commits, 0),
      keyChanges: () => Atomics.load(m.commits, 2),
    },
    m.root,
    m.options,
    () => {
      const counts = [...deliverer.counts()].map(([id, c]): [string, WebhookCounts] => [id, { ...c }]);
      const text = JSON.stringify(counts);
      if (text !== sent) {
        sent = text;
        post({ type: "counts", counts });
      }
    },
  );
  edited = () => deliverer.wake();
  // Each change of the commit count pings the deliverer; after a ping the count is looked at
  // again after the deliverer's scan spacing at the earliest (it reads no more often), so a busy
  // store path wakes this thread a bounded number of times a second.
  const watch = (seen: number) => {
    if (stopping) return;
    const changed = () => {
      const now = Atomics.load(m.commits, 0);
      notifier.ping();
      setTimeout(() => watch(now), scanSpacingMs);
    };
    const w = Atomics.waitAsync(m.commits, 0, seen);
    if (w.async) void w.value.then(changed);
    else changed();
  };
  watch(Atomics.load(m.commits, 0));
  stop = async () => {
    edited = undefined;
    await deliverer.stop();
    for (const resolve of durableWaits.values()) resolve();
    await opened.close();
  };
}
