// The webhook deliverer's own thread (a Worker; thread.ts starts it). It opens the store for
// itself (LMDB's environment again, or a small PostgreSQL pool of its own) and runs deliverer.ts
// there: reading the trail, signing, POSTing and moving cursors cost the request thread nothing.
// The request thread only tells it of commits and of edits through the API, and answers when
// what was committed is durable (LMDB flushes the request thread's commits).
// First, as in main.ts: the compiled binary's LMDB addon loads through it.
import "../native-addon";
import { readlinkSync } from "node:fs";
import { getPriority, setPriority } from "node:os";
import { CommitNotifier } from "../audit/notify";
import type { LogLevel } from "../config/config";
import type { KeyRecord } from "../keys/model";
import type { Logger } from "../log";
import { openStorage, type StorageSettings } from "../storage/index";
import type { Storage } from "../storage/storage";
import { type DeliveryOptions, startDeliverer, type WebhookCounts } from "./deliverer";

/** The request thread's messages. */
export type ToThread =
  | {
      type: "init";
      settings: StorageSettings;
      root: KeyRecord | undefined;
      options: DeliveryOptions;
      /** Added to the process's nice value for the thread (Linux; 0: as the process). */
      nice: number;
    }
  /** `edited`: a change through the API (re-read the subscriptions at once); else commits. */
  | { type: "wake"; edited: boolean }
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

/** Lowers this thread's priority by `nice` below the process's: nice values are per thread on Linux (elsewhere, nothing). */
function lowerPriority(nice: number) {
  if (nice <= 0) return;
  try {
    const tid = Number(readlinkSync("/proc/thread-self").split("/").pop());
    if (tid > 0) setPriority(tid, Math.min(19, getPriority(tid) + nice));
  } catch {
    // Not Linux: the thread runs at the process's priority.
  }
}

let stop: (() => Promise<void>) | undefined;
let wake: ((edited: boolean) => void) | undefined;
const durableWaits = new Map<number, () => void>();
let nextDurable = 0;

self.onmessage = async (event: MessageEvent<ToThread>) => {
  const m = event.data;
  if (m.type === "wake") wake?.(m.edited);
  else if (m.type === "durable") {
    durableWaits.get(m.id)?.();
    durableWaits.delete(m.id);
  } else if (m.type === "stop") {
    await stop?.();
    post({ type: "stopped" });
  } else if (m.type === "init") {
    lowerPriority(m.nice);
    try {
      await start(m);
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
  });
  // What the request thread committed is durable once it says so (LMDB: its flush).
  const durable = () =>
    new Promise<void>((resolve) => {
      const id = nextDurable++;
      durableWaits.set(id, resolve);
      post({ type: "durable", id });
    });
  const storage: Storage = Object.assign(Object.create(opened), { durable });
  const notifier = new CommitNotifier();
  let sent = "";
  const deliverer = startDeliverer({ storage, notifier, logger }, m.root, m.options, () => {
    const counts = [...deliverer.counts()].map(([id, c]): [string, WebhookCounts] => [id, { ...c }]);
    const text = JSON.stringify(counts);
    if (text !== sent) {
      sent = text;
      post({ type: "counts", counts });
    }
  });
  wake = (edited) => (edited ? deliverer.wake() : notifier.ping());
  stop = async () => {
    wake = undefined;
    await deliverer.stop();
    for (const resolve of durableWaits.values()) resolve();
    await opened.close();
  };
}
