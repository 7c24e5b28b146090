// A receiver that answers within the time limit while the delivering thread is not running (a
// busy machine; the delivery thread runs in the idle class) is a success: the thread's own wait
// is not counted against the receiver. A timer due runs before the socket's events that came
// meanwhile, so the limit used to expire first and the delivery was sent again. And a receiver
// that never answers still times out while the thread is kept from running again and again.
import { afterAll, expect, test } from "bun:test";
import { postWebhook } from "../../src/webhooks/post";

// The receiver, in a process of its own (it answers while this thread is blocked): it says on
// stdout when a request came, and answers it 150 ms later (closing the connection: each case
// makes its own); /never is never answered.
const receiver = Bun.spawn(
  [
    process.execPath,
    "-e",
    `const s = Bun.serve({ hostname: "127.0.0.1", port: 0, async fetch(req) {
       await req.text(); console.log("got");
       if (new URL(req.url).pathname === "/never") await new Promise(() => {});
       await Bun.sleep(150); return new Response("ok", { headers: { connection: "close" } });
     } });
     console.log(s.port);`,
  ],
  { stdout: "pipe", stderr: "inherit" },
);
afterAll(() => receiver.kill());

const lines = (async function* () {
  let buf = "";
  for await (const chunk of receiver.stdout) {
    buf += new TextDecoder().decode(chunk);
    for (let i = buf.indexOf("\n"); i >= 0; i = buf.indexOf("\n")) {
      yield buf.slice(0, i);
      buf = buf.slice(i + 1);
    }
  }
})();
const next = async () => (await lines.next()).value as string;
const port = Number(await next());

const post = (path: string, answerTimeoutMs: number) =>
  postWebhook(new URL(`http://127.0.0.1:${port}${path}`), { "content-type": "application/json" }, "{}", {
    connectTimeoutMs: 5000,
    answerTimeoutMs,
    allowPrivate: true,
    maxAnswerBytes: 1024,
  });

/** Keeps this thread running (not its event loop) for `ms`. */
const block = (ms: number) => {
  const until = performance.now() + ms;
  while (performance.now() < until) {}
};

test("an answer that came within the limit while this thread was blocked past it is a success", async () => {
  const sent = post("/hook", 1000);
  expect(await next()).toBe("got");
  // Blocked from the request's arrival until well past the limit; the answer comes at 150 ms.
  block(3000);
  const r = await sent;
  expect(r.error).toBeNull();
  expect(r.status).toBe(200);
});

test("a receiver that never answers times out while this thread is kept from running, slice after slice", async () => {
  let result: Awaited<ReturnType<typeof postWebhook>> | undefined;
  const sent = post("/never", 400).then((r) => {
    result = r;
  });
  expect(await next()).toBe("got");
  // Each turn of the event loop comes late: 300 ms blocked, then one turn.
  let slices = 0;
  while (!result && slices < 12) {
    block(300);
    slices++;
    await Bun.sleep(1);
  }
  await sent;
  expect(result?.error).toBe("no answer within 400 ms");
  expect(slices).toBeLessThanOrEqual(4);
});
