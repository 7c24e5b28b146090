// A deliverer's stop must not wait for the supervisor's next poll: a stop that comes while the
// supervisor reads the subscriptions (as right after a server starts on PostgreSQL) once waited
// for the sleep that followed the read (twice pollMs), a second per server stop in the tests.
import { expect, test } from "bun:test";
import { CommitNotifier } from "../../src/audit/notify";
import { createLogger } from "../../src/log";
import { openStorage } from "../../src/storage/index";
import type { Storage } from "../../src/storage/storage";
import { defaultDeliveryOptions, startDeliverer } from "../../src/webhooks/deliverer";
import { tempDir } from "../helpers";

test("stop during the supervisor's read of the subscriptions ends without waiting for its next poll", async () => {
  const dir = tempDir("memd-deliverer-");
  const real = await openStorage({ dataDir: dir.dir, mapSizeMb: 64 });
  try {
    // The real storage, with its read of the subscriptions held until the test lets it go.
    let reading!: () => void;
    const read = new Promise<void>((resolve) => (reading = resolve));
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const storage = new Proxy(real, {
      get(target, name, receiver) {
        if (name === "listWebhooks")
          return async () => {
            reading();
            await gate;
            return target.listWebhooks();
          };
        return Reflect.get(target, name, receiver);
      },
    }) as Storage;
    // A poll of an hour: a stop that waited for it would outlast the test's bound by far.
    const deliverer = startDeliverer(
      { storage, notifier: new CommitNotifier(), logger: createLogger("error", () => {}) },
      undefined,
      { ...defaultDeliveryOptions, pollMs: 3_600_000 },
    );
    await read;
    const stopped = deliverer.stop().then(() => "stopped" as const);
    release();
    const bound = new Promise<"still waiting">((resolve) => setTimeout(() => resolve("still waiting"), 5_000));
    expect(await Promise.race([stopped, bound])).toBe("stopped");
  } finally {
    await real.close();
    dir.cleanup();
  }
}, 20_000);
