// The page at /ui, in Chromium: the webhook subscriptions with their state, one subscription's
// recent deliveries (a failure and a success), and pausing it from the page.
import { afterAll, beforeAll, expect, test } from "bun:test";
import type { Browser } from "playwright-core";
import { launchChromium } from "../chromium";
import { rootSecret, startTestServer, type TestServer } from "../helpers";

let s: TestServer;
let browser: Browser | undefined;
let launchError: Error | undefined;
let answers = [500, 200];
const receiver = Bun.serve({
  hostname: "127.0.0.1",
  port: 0,
  fetch: () => new Response("", { status: answers.shift() ?? 200 }),
});
let hookId = "";

beforeAll(async () => {
  s = await startTestServer({ args: ["--webhook-allow-private", "--webhook-retry-base-ms", "20"] });
  const made = await s.json("POST", "/v1/webhooks", {
    url: `http://127.0.0.1:${receiver.port}/hook`,
    namespaces: "page",
    description: "page test",
  });
  hookId = made.body.id;
  await s.json("POST", "/v1/memory", { namespace: "page", entity: "e", content: "one", infer: false });
  const deadline = Date.now() + 15_000;
  while (Date.now() < deadline) {
    const log = (await s.json("GET", `/v1/webhooks/${hookId}/deliveries`)).body as { ok: boolean }[];
    if (log.some((d) => d.ok)) break;
    await Bun.sleep(20);
  }
  const launched = await launchChromium();
  if (launched instanceof Error) launchError = launched;
  else browser = launched;
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await s.stop();
  receiver.stop(true);
  answers = [];
});

test("lists subscriptions with their state; one shows its deliveries and pauses", async () => {
  if (launchError) throw launchError;
  const page = await (await browser!.newContext({ timezoneId: "UTC" })).newPage();
  const errors: string[] = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  page.setDefaultTimeout(10_000);
  await page.goto(`${s.url}/ui`);
  await page.getByLabel("API key").fill(rootSecret);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByRole("heading", { name: "Namespaces" }).waitFor();
  await page.getByRole("link", { name: "Webhooks" }).click();
  await page.getByRole("heading", { name: "Webhooks" }).waitFor();
  await page.getByText("1 webhook subscription").waitFor();
  expect(await page.locator("table.webhooks .badge").textContent()).toBe("active");
  await page.getByRole("link", { name: `http://127.0.0.1:${receiver.port}/hook` }).click();
  await page.getByRole("heading", { name: `Webhook ${hookId}` }).waitFor();
  const rows = await page.locator("table.deliveries tbody tr").allTextContents();
  expect(rows.length).toBe(2);
  expect(rows[0]).toContain("200");
  expect(rows[1]).toContain("answered 500");
  await page.getByRole("button", { name: "Pause" }).click();
  await page.getByRole("button", { name: "Resume" }).waitFor();
  expect((await s.json("GET", `/v1/webhooks/${hookId}`)).body.state).toBe("paused");
  expect(errors).toEqual([]);
}, 60_000);
