// Webhook delivery off the request thread: deliverer.ts runs in a Worker (delivery-thread.ts)
// with its own handle on the store. This thread tells it of commits (a count in shared memory,
// no message: see `commits`) and of edits through the API (a message), answers when
// its commits are durable, and keeps the counts it sends for /metrics. The thread runs at a lower
// priority (`nice`), so on a busy core the requests come first and deliveries catch up after.
import type { Core } from "../core";
import type { KeyRecord } from "../keys/model";
import type { StorageSettings } from "../storage/index";
import type { Deliverer, DeliveryOptions, WebhookCounts } from "./deliverer";
import type { FromThread, ToThread } from "./delivery-thread";

/**
 * The thread's entry point: beside this file when run from source; in the compiled binary, where
 * every module shares the binary's own URL, at its path under src/ (scripts/build.ts builds it
 * as an entry point of its own).
 */
const entry = import.meta.url.startsWith("file:///$bunfs/")
  ? "/$bunfs/root/webhooks/delivery-thread.ts"
  : new URL("./delivery-thread.ts", import.meta.url).href;

/** Starts the delivery thread; `settings` open the same store as this process's. */
export function startDeliveryThread(
  core: Pick<Core, "storage" | "notifier" | "logger">,
  root: KeyRecord | undefined,
  options: DeliveryOptions,
  settings: StorageSettings,
  nice: number,
): Deliverer {
  const { logger } = core;
  const counts = new Map<string, WebhookCounts>();
  let worker: Worker | undefined;
  let stopped = false;
  let stopping: Promise<void> | undefined;
  let onStopped: (() => void) | undefined;
  /**
   * This process's commits, counted in memory the thread shares: a commit costs the store path an
   * atomic add and a notify (which finds no one to wake while the thread is not waiting), not a
   * message; the thread waits on the count (Atomics.waitAsync) and looks at most every few ms.
   * The second count: those that may have changed events already in the trail (erasures), counted
   * before the first and before the request is answered, so the thread's next POST reads again.
   * The third: key revocations, counted before the revocation is answered, so no POST after it
   * goes out before the subscription's maker key was checked again.
   */
  const commits = new Int32Array(new SharedArrayBuffer(12));

  const send = (m: ToThread) => worker?.postMessage(m);
  const start = () => {
    const w = new Worker(entry);
    // Not what keeps the process alive: the server stops it when it stops.
    w.unref();
    w.onmessage = (event: MessageEvent<FromThread>) => {
      const m = event.data;
      if (m.type === "log") logger[m.level](m.msg, m.fields);
      else if (m.type === "counts") for (const [id, c] of m.counts) counts.set(id, c);
      else if (m.type === "durable")
        core.storage.durable().then(
          () => send({ type: "durable", id: m.id }),
          () => send({ type: "durable", id: m.id }),
        );
      else if (m.type === "failed") {
        logger.error("webhook delivery thread failed to start", { error: m.error });
        again(w);
      } else if (m.type === "stopped") onStopped?.();
    };
    w.onerror = (event) => {
      logger.error("webhook delivery thread failed", { error: event.message });
      again(w);
    };
    worker = w;
    w.postMessage({ type: "init", settings, root, options, nice, commits } satisfies ToThread);
  };
  /** Ends `w`; the next look starts another (unless stopping). */
  const again = (w: Worker) => {
    if (worker !== w) return;
    w.terminate();
    worker = undefined;
    onStopped?.();
  };
  // Started once there is an active subscription (a server without one pays nothing for a
  // thread): looked for now, after each edit through the API, and every other poll (another
  // replica's subscriptions, on PostgreSQL).
  let looking = false;
  const look = async () => {
    if (worker || stopped || looking) return;
    looking = true;
    try {
      if ((await core.storage.listWebhooks()).some((w) => w.state === "active") && !worker && !stopped) start();
    } catch (e) {
      logger.error("webhook supervisor failed", { error: String(e) });
    } finally {
      looking = false;
    }
  };
  const poll = setInterval(look, options.pollMs * 2);
  poll.unref?.();
  void look();
  const unsubscribe = core.notifier.subscribeAll((scrubbed) => {
    if (scrubbed) Atomics.add(commits, 1, 1);
    Atomics.add(commits, 0, 1);
    Atomics.notify(commits, 0);
  });

  return {
    wake: () => (worker ? send({ type: "edited" }) : void look()),
    keysChanged: () => {
      Atomics.add(commits, 2, 1);
      Atomics.notify(commits, 0);
    },
    counts: () => counts,
    stop() {
      stopping ??= (async () => {
        stopped = true;
        clearInterval(poll);
        unsubscribe();
        const w = worker;
        if (!w) return;
        // The thread gives its leases up and closes its store; a stuck one is ended regardless.
        // The wait keeps the process alive (the thread alone does not).
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, 10_000);
          onStopped = () => {
            clearTimeout(timer);
            resolve();
          };
          send({ type: "stop" });
        });
        w.terminate();
        worker = undefined;
      })();
      return stopping;
    },
  };
}
