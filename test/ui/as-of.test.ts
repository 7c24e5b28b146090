// The page at /ui, in Chromium: an entity's memories "as of" a date-time (replayed from the audit
// trail, read-only) and back to now; each memory's observed date in its list and its history.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Browser, Page } from "playwright-core";
import { launchChromium } from "../chromium";
import { rootSecret, startTestServer, type TestServer } from "../helpers";

let s: TestServer;
let browser: Browser | undefined;
let launchError: Error | undefined;
const pageErrors: string[] = [];
let beforeEdit = 0;
let teaId = "";

async function raw(content: string, extra: Record<string, unknown> = {}) {
  const r = await s.json("POST", "/v1/memory", { namespace: "hist", entity: "ann", content, infer: false, ...extra });
  expect(r.status).toBe(200);
  return r.body.memories[0];
}

beforeAll(async () => {
  s = await startTestServer();
  const tea = await raw("Ann drinks green tea", { observedAt: "2024-04-02T10:00:00Z" });
  teaId = tea.id;
  await raw("Ann lives in Rome");
  // The page's date-time input has whole seconds: the moment shown is the next whole second,
  // after both stores, and the edit comes after it.
  beforeEdit = Math.ceil((Date.now() + 1) / 1000) * 1000;
  await Bun.sleep(beforeEdit - Date.now() + 50);
  expect((await s.json("PATCH", `/v1/memory/${tea.id}`, { content: "Ann drinks black tea" })).status).toBe(200);
  await raw("Ann has a dog");
  const launched = await launchChromium();
  if (launched instanceof Error) launchError = launched;
  else browser = launched;
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await s.stop();
});

async function open(): Promise<Page> {
  if (launchError) throw launchError;
  const context = await browser!.newContext({ viewport: { width: 1280, height: 860 }, timezoneId: "UTC" });
  const page = await context.newPage();
  page.on("pageerror", (e) => pageErrors.push(String(e)));
  page.setDefaultTimeout(10_000);
  await page.goto(`${s.url}/ui`);
  await page.getByLabel("API key").fill(rootSecret);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByRole("heading", { name: "Namespaces" }).waitFor();
  await page.evaluate(() => {
    (globalThis as any).location.hash = "#/ns/hist/e/ann";
  });
  await page.getByRole("heading", { name: "ann" }).waitFor();
  return page;
}

/** The date-time input's value for a time, in the page's zone (UTC here), whole seconds. */
const local = (ms: number) => new Date(ms).toISOString().slice(0, 19);

describe("as of a date-time", () => {
  test("shows the memories as they were then, read-only; Now returns to the current ones", async () => {
    const page = await open();
    await page.getByText("3 memories").waitFor();
    expect(await page.locator(".memory .content").allTextContents()).toEqual([
      "Ann has a dog",
      "Ann lives in Rome",
      "Ann drinks black tea",
    ]);
    await page.getByLabel("As of (local time)").fill(local(beforeEdit));
    await page.getByRole("button", { name: "Show as of" }).click();
    await page.getByText(/^As of .*read-only/).waitFor();
    await page.getByText("2 memories").waitFor();
    expect(await page.locator(".memory .content").allTextContents()).toEqual([
      "Ann lives in Rome",
      "Ann drinks green tea",
    ]);
    expect(await page.locator(".memory button.edit, .memory button.delete").count()).toBe(0);
    // Search as of that moment finds the old wording.
    await page.getByLabel("Search memories").fill("green");
    await page.getByRole("button", { name: "Search", exact: true }).click();
    await page.getByText(/Search \(keyword\) for “green”: 1 memory/).waitFor();
    await page.getByRole("button", { name: "Clear" }).click();
    await page.getByRole("button", { name: "Now" }).click();
    await page.getByText("3 memories").waitFor();
    expect(await page.locator(".memory button.edit").count()).toBe(3);
    expect(pageErrors).toEqual([]);
    await page.context().close();
  }, 60_000);

  test("a memory observed before it was stored shows its observed date, in the list and in its history", async () => {
    const page = await open();
    const item = page.locator(".memory", { hasText: "Ann drinks black tea" });
    await item.locator(".observed time").waitFor();
    expect(await item.locator(".observed time").getAttribute("datetime")).toBe("2024-04-02T10:00:00.000Z");
    await page.evaluate((id) => {
      (globalThis as any).location.hash = `#/m/${id}`;
    }, teaId);
    await page.getByRole("heading", { name: "History of a memory" }).waitFor();
    const observed = await page
      .locator(".event .observed time")
      .evaluateAll((els) => els.map((e) => (e as any).getAttribute("datetime")));
    expect(observed).toEqual(["2024-04-02T10:00:00.000Z", "2024-04-02T10:00:00.000Z"]);
    expect(pageErrors).toEqual([]);
    await page.context().close();
  }, 60_000);
});
