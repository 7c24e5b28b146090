// A receiver that answers within the time limit while the delivering thread is not running (a
// busy machine; the delivery thread runs in the idle class) is a success: the thread's own wait
// is not counted against the receiver. A timer due runs before the socket's events that came
// meanwhile, so the limit used to expire first and the delivery was sent again.
import { afterAll, expect, test } from "bun:test";
import { postWebhook } from "../../src/webhooks/post";

// The receiver, in a process of its own (it answers while this thread is blocked): it says on
// stdout when a request came, and answers it 150 ms later.
const receiver = Bun.spawn(
  [
    process.execPath,
    "-e",
    `const s = Bun.serve({ hostname: "127.0.0.1", port: 0, async fetch(req) {
       await req.text(); console.log("got"); await Bun.sleep(150); return new Response("ok");
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

test("an answer that came within the limit while this thread was blocked past it is a success", async () => {
  const port = Number(await next());
  const post = postWebhook(new URL(`http://127.0.0.1:${port}/hook`), { "content-type": "application/json" }, "{}", {
    connectTimeoutMs: 5000,
    answerTimeoutMs: 400,
    allowPrivate: true,
    maxAnswerBytes: 1024,
  });
  expect(await next()).toBe("got");
  // Blocked from the request's arrival until well past the limit; the answer comes at 150 ms.
  const until = performance.now() + 1500;
  while (performance.now() < until) {}
  const r = await post;
  expect(r.error).toBeNull();
  expect(r.status).toBe(200);
});
