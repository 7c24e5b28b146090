// The page's ways back (issue 33), in a real browser against a real server: "Undo this change"
// on a change in a memory's history, "Restore to this moment" in the as-of view, and the dry run
// of a consolidation shown before it is applied. Each is checked through the API.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Browser, Page } from "playwright-core";
import { launchChromium } from "../chromium";
import { rootSecret, startTestServer, type TestServer } from "../helpers";

const s: TestServer = await startTestServer();
let browser: Browser | undefined;
let launchError: Error | undefined;
const ns = "undo-ui";

beforeAll(async () => {
  const launched = await launchChromium();
  if (launched instanceof Error) launchError = launched;
  else browser = launched;
});
afterAll(async () => {
  await browser?.close();
  await s.stop();
});

async function page(): Promise<Page> {
  if (launchError) throw launchError;
  const p = await (await browser!.newContext({ viewport: { width: 1280, height: 860 } })).newPage();
  p.setDefaultTimeout(10_000);
  await p.goto(`${s.url}/ui`);
  await p.getByLabel("API key").fill(rootSecret);
  await p.getByRole("button", { name: "Sign in" }).click();
  await p.getByRole("heading", { name: "Namespaces" }).waitFor();
  return p;
}
const go = (p: Page, hash: string) =>
  p.evaluate((h) => {
    (globalThis as any).location.hash = h;
  }, hash);
const raw = async (entity: string, content: string) =>
  (await s.json("POST", "/v1/memory", { namespace: ns, entity, content, infer: false })).body.memories[0].id as string;
const contents = async (entity: string) =>
  ((await s.json("GET", `/v1/memory?namespace=${ns}&entity=${entity}`)).body.memories as any[])
    .map((m) => m.content)
    .sort();
async function until(check: () => Promise<boolean>) {
  for (let i = 0; i < 100; i++) {
    if (await check()) return;
    await Bun.sleep(50);
  }
  throw new Error("not within 5 s");
}

describe("undo in the page", () => {
  test("Undo this change: the memory goes back to what it was before the change", async () => {
    const p = await page();
    const id = await raw("dana", "Dana likes tea");
    expect((await s.json("PATCH", `/v1/memory/${id}`, { content: "Dana likes coffee" })).status).toBe(200);
    await go(p, `#/m/${id}`);
    await p.locator("li.event.kind-UPDATE").getByRole("button", { name: "Undo this change" }).click();
    const dialog = p.getByRole("dialog");
    await dialog.getByText("Dana likes tea").waitFor();
    await dialog.getByRole("button", { name: "Undo" }).click();
    await until(async () => (await s.json("GET", `/v1/memory/${id}`)).body.content === "Dana likes tea");
    const [last] = (await s.json("GET", `/v1/memory/events?memoryId=${id}&limit=1`)).body;
    expect(last).toMatchObject({ event: "UPDATE", revertOf: expect.any(String) });
  }, 60_000);

  test("Restore to this moment in the as-of view", async () => {
    const p = await page();
    await raw("erin", "Erin plays golf");
    // The as-of field has whole seconds: the changes come after the next second starts.
    const second = Math.ceil((Date.now() + 1) / 1000) * 1000;
    await Bun.sleep(second - Date.now() + 20);
    const later = await raw("erin", "Erin plays tennis");
    expect((await s.json("DELETE", `/v1/memory/${later}`)).status).toBe(200);
    await raw("erin", "Erin plays squash");
    await go(p, `#/ns/${ns}/e/erin`);
    const local = new Date(second - new Date(second).getTimezoneOffset() * 60_000).toISOString().slice(0, 19);
    await p.locator("#as-of").fill(local);
    await p.getByRole("button", { name: "Show as of" }).click();
    await p.getByRole("button", { name: "Restore to this moment" }).click();
    await p.getByRole("dialog").getByRole("button", { name: "Restore" }).click();
    await until(async () => JSON.stringify(await contents("erin")) === JSON.stringify(["Erin plays golf"]));
  }, 60_000);

  test("Consolidate…: the dry run's groups first, then the merge", async () => {
    const p = await page();
    await raw("finn", "Finn likes jazz");
    await raw("finn", "finn likes jazz.");
    await raw("finn", "Finn likes 2 bands");
    await go(p, `#/ns/${ns}/e/finn`);
    await p.getByRole("button", { name: "Consolidate…" }).click();
    const dialog = p.getByRole("dialog");
    await dialog.getByText(/1 memories would be merged/).waitFor();
    expect(await contents("finn")).toHaveLength(3); // the dry run wrote nothing
    await dialog.getByRole("button", { name: "Consolidate" }).click();
    await until(async () => (await contents("finn")).length === 2);
  }, 60_000);
});
