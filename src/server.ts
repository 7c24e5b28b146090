import { buildApp } from "./app";
import { CommitNotifier, notifyingStorage } from "./audit/notify";
import { StreamHub } from "./audit/stream-service";
import { commit, compiled, version } from "./build-info";
import type { Config } from "./config/config";
import { startConsolidation } from "./consolidate/service";
import type { Core } from "./core";
import { embedStats } from "./embedding/client";
import { startEmbedWorker } from "./embedding/worker";
import { createSmartStore, describeExtractor, modelStats } from "./extraction/service";
import { socketBodyLimit } from "./http/json-body";
import type { KeyRecord } from "./keys/model";
import { createKeyIf, type NewKey, rootKeyFromSecret } from "./keys/service";
import { createLogger } from "./log";
import { startTtlSweeper } from "./memory/ttl";
import { openStorage, storageSite } from "./storage/index";
import { settledStorage } from "./storage/settle";
import type { Storage } from "./storage/storage";
import { type Deliverer, defaultDeliveryOptions } from "./webhooks/deliverer";
import { startDeliveryThread } from "./webhooks/thread";

/** Where the data lives, for logs: the data dir, or the database host (never the password). */
export function storageName(config: Config): { dataDir: string } | { database: string } {
  return storageSite(config).name;
}

const rootKeySpec: NewKey = { name: "root", permission: "admin", namespaces: ["*"] };

/**
 * The command that makes a new admin key on this server's store, for the first-start message:
 * the binary's own path (bin/memd from a source checkout), and the data dir, or the database as
 * MEMD_DATABASE_URL (its URL may hold a password, which is not printed).
 */
export function rescueCommand(config: Config): string {
  const memd = compiled ? process.execPath : "bin/memd";
  return `${memd} keys create --name rescue --permission admin --namespace '*' ${storageSite(config).option}`;
}

export interface Running {
  url: string;
  port: number;
  core: Core;
  /** Open live event streams; `stop()` ends them. */
  streams: StreamHub;
  /**
   * Stops accepting at once, lets requests in flight finish for at most `graceMs` (default:
   * config.shutdownGraceMs), then aborts model calls (their requests answer 503 shutting_down),
   * ends live streams, closes every connection, flushes and closes the storage and releases the data dir.
   */
  stop(graceMs?: number): Promise<void>;
}

/** A start that cannot go on; `message` is one line for the operator (exit 1). */
export class StartError extends Error {}

function listenError(e: unknown, host: string, port: number): StartError {
  const code = (e as NodeJS.ErrnoException)?.code;
  if (code === "EADDRINUSE") return new StartError(`port ${port} on ${host} is already in use`);
  if (code === "EACCES" || code === "EPERM") return new StartError(`port ${port} on ${host}: permission denied`);
  if (code === "EADDRNOTAVAIL") return new StartError(`cannot listen on ${host}: no such local address`);
  return new StartError(`cannot listen on port ${port} on ${host}: ${(e as Error)?.message ?? e}`);
}

/** Fails early, before the data dir is touched, when a fixed port is already taken. */
function probePort(host: string, port: number) {
  if (port === 0) return;
  try {
    Bun.listen({ hostname: host, port, socket: { data() {} } }).stop(true);
  } catch (e) {
    throw listenError(e, host, port);
  }
}

/**
 * Starts memd, in this order: check the port is free, create and lock the data dir, open the
 * store, bind the port, and only then create (and print once on stderr) a root key when there
 * is no MEMD_API_KEY and no stored key. A start that fails throws StartError having printed and
 * created no key, and releases whatever it took.
 */
export async function startServer(
  config: Config,
  printSecret: (text: string) => void = (t) => process.stderr.write(t),
  writeLog?: (line: string) => void,
): Promise<Running> {
  const logger = createLogger(config.logLevel, writeLog);
  probePort(config.host, config.port);
  const site = storageSite(config);
  let release: (() => void) | undefined;
  let storage: Storage | undefined;
  let stopSweeper: (() => Promise<void>) | undefined;
  let stopEmbedder: (() => Promise<void>) | undefined;
  let stopConsolidation: (() => Promise<void>) | undefined;
  let webhooks: Deliverer | undefined;
  try {
    try {
      release = await site.claim((msg) => logger.warn(msg, { dataDir: config.dataDir }));
    } catch (e) {
      throw new StartError((e as Error).message);
    }
    try {
      storage = await openStorage(config, (msg, fields) => logger.info(msg, fields));
    } catch (e) {
      throw new StartError(`${site.openFailure}: ${(e as Error).message}`);
    }
    const notifier = new CommitNotifier();
    // Aborted when the grace period ends: model and embedding calls in flight stop and answer 503 shutting_down.
    const shutdown = new AbortController();
    const core: Core = {
      storage: notifyingStorage(settledStorage(storage), notifier),
      notifier,
      config,
      logger,
      shutdown: shutdown.signal,
    };
    const root: KeyRecord | undefined = config.apiKey ? rootKeyFromSecret(config.apiKey) : undefined;
    const streams = new StreamHub();
    webhooks = startDeliveryThread(
      core,
      root,
      {
        ...defaultDeliveryOptions,
        allowPrivate: config.webhookAllowPrivate,
        retryBaseMs: config.webhookRetryBaseMs,
        retryMaxMs: config.webhookRetryMaxMs,
        disableAfterMs: config.webhookDisableAfterMs,
        connectTimeoutMs: config.webhookConnectTimeoutMs,
        answerTimeoutMs: config.webhookTimeoutMs,
        busyShare: config.webhookBusyPercent / 100,
      },
      config,
      config.webhookThreadNice,
    );
    const app = buildApp(core, {
      webhooks,
      root,
      smartStore: createSmartStore(core, shutdown.signal),
      modelStats,
      embedStats,
      streams,
    });
    try {
      // Elysia's Bun adapter defaults to SO_REUSEPORT: a second server on the port would start and
      // share the traffic. Without it the bind fails, as it should.
      app.listen({ hostname: config.host, port: config.port, reusePort: false, maxRequestBodySize: socketBodyLimit });
    } catch (e) {
      throw listenError(e, config.host, config.port);
    }
    const server = app.server!;
    const port = server.port!;
    const url = `http://${config.host}:${port}`;

    // On an empty store: one root key, printed once (replicas starting together make one, not one each).
    const first = root ? undefined : await createKeyIf(storage, rootKeySpec, { onlyIfNone: true });
    if (first) {
      const { key, secret } = first;
      printSecret(
        `\nmemd: created a root key (${key.id}); it is shown only this once:\n\n  ${secret}\n\n` +
          `Use it as: curl -H "Authorization: Bearer ${secret}" ${url}/v1/...\n\n` +
          `If it is lost, make another admin key on the same store (this works while the server runs):\n\n` +
          `  ${rescueCommand(config)}\n\n`,
      );
    }
    stopSweeper = startTtlSweeper(core);
    stopEmbedder = startEmbedWorker(core);
    stopConsolidation = startConsolidation(core, config.consolidateEverySeconds);
    logger.info("memd started", {
      version,
      commit,
      ...storageName(config),
      address: url,
      extractor: describeExtractor(config),
    });

    const openStorageNow = storage;
    const held = release;
    const sweeper = stopSweeper;
    const embedder = stopEmbedder;
    const consolidation = stopConsolidation;
    const deliverer = webhooks;
    let stopping: Promise<void> | undefined;
    const stop = (graceMs = config.shutdownGraceMs) =>
      (stopping ??= (async () => {
        const started = performance.now();
        // Stop accepting at once; resolves when every connection is done. Live streams never
        // finish by themselves: end them. Only requests in flight get the grace: Bun's stop(false)
        // also waits for a kept-alive connection whose last body was never read (a 413 answered
        // from its Content-Length) until it times out, so once no request is in flight the
        // connections left, all idle, are closed at once.
        const drained = server.stop(false).then(() => true);
        streams.closeAll();
        const idle = noneInFlight(server);
        if (!(await within(Promise.race([drained, idle.done]), graceMs))) {
          shutdown.abort();
          // The aborted smart stores answer 503 shutting_down; give them a moment to be sent.
          await within(Promise.race([drained, idle.done]), Math.min(500, Math.max(50, graceMs / 10)));
        }
        idle.cancel();
        await server.stop(true);
        await sweeper();
        await embedder();
        await consolidation();
        await deliverer.stop();
        await openStorageNow.close();
        held?.();
        logger.info("memd stopped", {
          version,
          commit,
          ...storageName(config),
          address: url,
          ms: Math.round(performance.now() - started),
        });
        logger.flush();
      })());
    return { url, port, core, streams, stop };
  } catch (e) {
    await stopSweeper?.();
    await stopEmbedder?.();
    await stopConsolidation?.();
    await webhooks?.stop();
    await storage?.close().catch(() => {});
    release?.();
    throw e;
  }
}

/** Resolves once `server` has no request in flight (polled: Bun has no event for it). */
function noneInFlight(server: { readonly pendingRequests: number }) {
  let timer: ReturnType<typeof setInterval> | undefined;
  const done = new Promise<void>((resolve) => {
    const check = () => {
      if (server.pendingRequests > 0) return;
      clearInterval(timer);
      resolve();
    };
    timer = setInterval(check, 20);
    check();
  });
  return { done, cancel: () => clearInterval(timer) };
}

/** Whether `p` settles within `ms`. */
async function within(p: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), ms);
  });
  try {
    return await Promise.race([p.then(() => true as const), timeout]);
  } finally {
    clearTimeout(timer);
  }
}
