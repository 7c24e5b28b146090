// The delivery thread runs below the request thread: niced (--webhook-thread-nice, default 19)
// and, at 19, also in Linux's idle scheduling class where the process may take it out again for
// its LMDB writes (CAP_SYS_NICE, or an RLIMIT_NICE that allows it): a waking request thread
// preempts it at once.
import { expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { mayLeaveIdle } from "../../src/thread-priority";
import { startTestServer } from "../helpers";
import { startReceiver } from "./receiver";

const SCHED_OTHER = 0;
const SCHED_IDLE = 5;

/** The delivery thread's nice value and scheduling class, with the class it says it took. */
async function deliveryThread(args: string[]) {
  const s = await startTestServer({ args: ["--webhook-allow-private", ...args], env: { MEMD_EMBEDDER: "none" } });
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
    return { nice: Number(fields[19 - 3]), policy: Number(fields[41 - 3]), idle: line!.idle };
  } finally {
    await s.stop();
    await r.stop();
  }
}

test("the delivery thread is at nice 19 by default, in the idle class where it may leave it; niced only below 19", async () => {
  const usual = await deliveryThread([]);
  expect(usual.nice).toBe(19);
  expect(usual.idle).toBe(mayLeaveIdle(19));
  expect(usual.policy).toBe(usual.idle ? SCHED_IDLE : SCHED_OTHER);
  const niced = await deliveryThread(["--webhook-thread-nice", "10"]);
  expect(niced.nice).toBeGreaterThanOrEqual(10);
  expect(niced.idle).toBe(false);
  expect(niced.policy).toBe(SCHED_OTHER);
}, 30_000);
