// The delivery thread runs below the request thread: niced and, where the process may take it out
// again for its LMDB writes (CAP_SYS_NICE, or an RLIMIT_NICE that allows it), in Linux's idle
// scheduling class, so that a waking request thread preempts it at once.
import { expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { mayLeaveIdle } from "../../src/thread-priority";
import { startTestServer } from "../helpers";
import { startReceiver } from "./receiver";

const SCHED_IDLE = 5;

test("the delivery thread is niced, and in the idle class where it may leave it", async () => {
  const s = await startTestServer({ args: ["--webhook-allow-private"], env: { MEMD_EMBEDDER: "none" } });
  const r = startReceiver();
  try {
    expect((await s.json("POST", "/v1/webhooks", { url: r.url, namespaces: "prio" })).status).toBe(201);
    let line: { thread: number; idle: boolean } | undefined;
    for (let i = 0; i < 200 && !line; i++) {
      await s.settleLogs();
      const found = s.logs.find((l) => l.includes('"webhook delivery thread started"'));
      line = found ? JSON.parse(found) : undefined;
      if (!line) await Bun.sleep(25);
    }
    expect(line).toBeDefined();
    // /proc/<pid>/task/<tid>/stat after the name: state is field 3, nice 19, policy 41.
    const fields = readFileSync(`/proc/${process.pid}/task/${line!.thread}/stat`, "utf8").split(") ")[1].split(" ");
    const nice = Number(fields[19 - 3]);
    const policy = Number(fields[41 - 3]);
    expect(nice).toBeGreaterThanOrEqual(10);
    expect(line!.idle).toBe(mayLeaveIdle(nice));
    expect(policy === SCHED_IDLE).toBe(line!.idle);
  } finally {
    await s.stop();
    await r.stop();
  }
});
