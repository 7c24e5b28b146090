// The page at /ui in a real browser: Debian's Chromium driven by playwright-core, against a real
// server with real data (in this process, on LMDB). If Chromium cannot start, every test fails
// saying why; none is skipped for it. Screenshots of each main view (desktop and 375 px wide) go
// to test-artifacts/ui/; with MEMD_UPDATE_SCREENSHOTS=1 also to docs/screenshots/ (docs/ui.md's).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import type { Browser, BrowserContext, Page } from "playwright-core";
import type { MemoryOp } from "../../src/storage/storage";
import { launchChromium } from "../chromium";
import { type ChatRequest, startFakeModel } from "../fake-model";
import { rootSecret, startTestServer, type TestServer } from "../helpers";

const repo = join(import.meta.dir, "../..");
const artifacts = join(repo, "test-artifacts/ui");
const readme = join(repo, "docs/screenshots");
const updateReadme = process.env.MEMD_UPDATE_SCREENSHOTS === "1";

const fake = startFakeModel();
const s: TestServer = await startTestServer({
  env: { MEMD_LLM_BASE_URL: fake.url, MEMD_LLM_MODEL: "tiny", MEMD_LLM_API_KEY: "k", MEMD_LLM_TIMEOUT_MS: "5000" },
});
// Endpoints that other issues add: the tests of their flows run once they are in this build.
const paths = (await s.json("GET", "/v1/openapi.json")).body.paths as Record<string, Record<string, unknown>>;
const has = (method: string, path: string) => paths[path]?.[method] !== undefined;
const hasSearch = has("post", "/v1/memory/search");
const hasPatch = has("patch", "/v1/memory/{id}");
const hasErase = has("post", "/v1/memory/erase");

let browser: Browser | undefined;
let launchError: Error | undefined;
/** Every request the pages made, to check that none left 127.0.0.1. */
const requested: string[] = [];
/** JavaScript dialogs (alert, confirm): the page never opens one, so any is an injected script. */
const dialogs: string[] = [];
/** Uncaught page errors and console errors (a CSP violation is one). */
const pageErrors: string[] = [];

const keys: Record<string, { id: string; secret: string }> = {};
const ids: Record<string, string> = {};

async function makeKey(name: string, permission: string, namespaces: string[]) {
  const r = await s.json("POST", "/v1/keys", { name, permission, namespaces });
  expect(r.status).toBe(201);
  return { id: r.body.id as string, secret: r.body.secret as string };
}

async function raw(namespace: string, entity: string, content: string, extra: Record<string, unknown> = {}) {
  const r = await s.json("POST", "/v1/memory", { namespace, entity, content, infer: false, ...extra });
  expect(r.status).toBe(200);
  return r.body.memories[0].id as string;
}

const answer = (...operations: object[]) => JSON.stringify({ operations });
function handleOf(r: ChatRequest, content: string) {
  const user = String(r.messages.find((m) => m.role === "user")?.content);
  const section = user.split("EXISTING MEMORIES:\n")[1].split("\n\nNEW CONTENT:")[0];
  for (const line of section.split("\n")) {
    const m = /^(m\d+) \[[^\]]*\] (.*)$/.exec(line);
    if (m && m[2] === content) return m[1];
  }
  return undefined;
}

beforeAll(async () => {
  mkdirSync(artifacts, { recursive: true });
  if (updateReadme) mkdirSync(readme, { recursive: true });
  // Data: a namespace with a few entities, an XSS attempt, a REPLACE made by the (fake) model.
  ids.tea = await raw("acme", "alice", "Alice drinks green tea every morning", {
    category: "preference",
    tags: ["food"],
  });
  ids.lyon = await raw("acme", "alice", "Alice lives in Paris", { category: "location", tags: ["home"] });
  ids.xss = await raw("acme", "alice", "<img src=x onerror=alert(1)>", { category: "note", tags: ["<b>tag</b>"] });
  ids.vegetarian = await raw("acme", "alice", "Alice is vegetarian", {
    category: "preference",
    tags: ["food", "diet"],
  });
  await raw("acme", "bob", "Bob plays chess on Sundays", { category: "hobby" });
  await raw("acme", "carol", "Carol prefers email over phone", { category: "preference" });
  await raw("globex", "dave", "Dave manages the Berlin office", { category: "work" });
  fake.reply((req) =>
    answer({ fact: "Alice lives in Lyon", decision: "REPLACE", target: handleOf(req, "Alice lives in Paris") }),
  );
  const smart = await s.json("POST", "/v1/memory", {
    namespace: "acme",
    entity: "alice",
    content: "I moved from Paris to Lyon last spring",
    category: "location",
  });
  expect(smart.status).toBe(200);
  expect(smart.body.memories[0].event).toBe("REPLACE");
  ids.lyonNew = smart.body.memories[0].id;
  keys.read = await makeKey("support (read)", "read", ["acme"]);
  keys.write = await makeKey("agent (read_write)", "read_write", ["acme"]);
  keys.admin = await makeKey("operator (admin)", "admin", ["acme"]);

  const launched = await launchChromium();
  if (launched instanceof Error) launchError = launched;
  else browser = launched;
});

afterAll(async () => {
  await browser?.close();
  await s.stop();
  await fake.stop();
});

/** A new browser context (its own session storage) and page, watched for requests, dialogs and errors. */
async function open(viewport = { width: 1280, height: 860 }): Promise<{ context: BrowserContext; page: Page }> {
  if (launchError) throw launchError;
  const context = await browser!.newContext({ viewport, deviceScaleFactor: 1 });
  const page = await context.newPage();
  page.on("request", (r) => requested.push(r.url()));
  page.on("dialog", async (d) => {
    dialogs.push(`${d.type()}: ${d.message()}`);
    await d.dismiss();
  });
  page.on("pageerror", (e) => pageErrors.push(String(e)));
  page.on("console", (m) => {
    if (m.type() === "error" && !/Failed to load resource/.test(m.text())) pageErrors.push(m.text());
  });
  page.setDefaultTimeout(10_000);
  return { context, page };
}

async function signIn(page: Page, secret: string) {
  await page.goto(`${s.url}/ui`);
  await page.getByLabel("API key").fill(secret);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByRole("heading", { name: "Namespaces" }).waitFor();
}

async function shoot(page: Page, name: string) {
  const file = `${name}.png`;
  await page.screenshot({ path: join(artifacts, file), fullPage: false });
  if (updateReadme) await page.screenshot({ path: join(readme, file), fullPage: false });
}

// Browser globals inside page.evaluate callbacks come from globalThis: this file is type-checked without the DOM library.
const go = (page: Page, hash: string) =>
  page.evaluate((h) => {
    (globalThis as any).location.hash = h;
  }, hash);

/** Controls in the page that have no label (the page labels every one). */
const unlabelled = (page: Page) =>
  page.evaluate(() =>
    [...(globalThis as any).document.querySelectorAll("input, select, textarea, button")]
      .filter((el: any) => {
        const e = el;
        const name =
          e.labels?.length || e.getAttribute("aria-label") || (el.tagName === "BUTTON" && el.textContent?.trim());
        return !name;
      })
      .map((el: any) => el.outerHTML as string),
  );

describe("the page in Chromium", () => {
  test("signs in, browses namespaces -> entities -> memories, by keyboard too; XSS content stays text", async () => {
    const { context, page } = await open();
    await page.goto(`${s.url}/ui`);
    await page.getByLabel("API key").waitFor();
    await shoot(page, "sign-in-desktop");
    // A wrong key: the API's message is shown.
    await page.getByLabel("API key").fill("memd_wrong");
    await page.keyboard.press("Enter");
    await page.locator("#errors").getByText("unknown or revoked API key").waitFor();
    // Keyboard only: type the key, Enter, Tab to a namespace, Enter.
    await page.getByLabel("API key").fill(rootSecret);
    await page.keyboard.press("Enter");
    await page.getByRole("heading", { name: "Namespaces" }).waitFor();
    expect(await page.evaluate(() => sessionStorage.getItem("memd.key"))).toBe(rootSecret);
    expect(await context.cookies()).toEqual([]);
    const rows = await page.locator("tbody tr").allTextContents();
    expect(rows[0]).toContain("acme");
    expect(rows[1]).toContain("globex");
    await shoot(page, "namespaces-desktop");
    let focused = "";
    for (let i = 0; i < 30 && focused !== "acme"; i++) {
      await page.keyboard.press("Tab");
      focused = await page.evaluate(() => (globalThis as any).document.activeElement?.textContent ?? "");
    }
    expect(focused).toBe("acme");
    await page.keyboard.press("Enter");
    await page.getByRole("heading", { name: "acme" }).waitFor();
    await page.getByRole("link", { name: "alice" }).waitFor();
    const alice = await page.locator("tbody tr", { hasText: "alice" }).textContent();
    expect(alice).toMatch(/alice\s*4/); // four current memories: Paris was replaced by Lyon
    await shoot(page, "entities-desktop");
    await page.getByRole("link", { name: "alice" }).click();
    await page.getByRole("heading", { name: "alice" }).waitFor();
    await page.getByText("4 memories").waitFor();
    // The XSS memory shows its characters, and no element was made from it.
    await page.getByText("<img src=x onerror=alert(1)>", { exact: true }).waitFor();
    expect(await page.locator(".memory .tag").allTextContents()).toContain("<b>tag</b>");
    expect(await page.locator("main img, main b").count()).toBe(0);
    expect(await unlabelled(page)).toEqual([]);
    await shoot(page, "memories-desktop");
    // Filters: by category, then by tag.
    await page.getByLabel("Category").selectOption("preference");
    await page.getByText("2 memories of 4 (filtered)").waitFor();
    await page.getByLabel("Tag").selectOption("diet");
    await page.getByText("1 memory of 4 (filtered)").waitFor();
    expect(await page.locator(".memory .content").allTextContents()).toEqual(["Alice is vegetarian"]);
    expect(dialogs).toEqual([]);
    await context.close();
  }, 60_000);

  test.skipIf(!hasSearch)(
    "search finds a memory by words (POST /v1/memory/search)",
    async () => {
      const { context, page } = await open();
      await signIn(page, rootSecret);
      await go(page, `#/ns/acme/e/alice`);
      await page.getByLabel("Search memories").fill("green tea");
      await page.getByRole("button", { name: "Search", exact: true }).click();
      await page.getByText(/Search \(\w+\) for “green tea”/).waitFor();
      expect(await page.locator(".memory .content").first().textContent()).toBe("Alice drinks green tea every morning");
      await page.getByRole("button", { name: "Clear" }).click();
      await page.getByText("4 memories").waitFor();
      await context.close();
    },
    60_000,
  );

  test("a memory's history after a smart store REPLACEd it: kinds, actor, reason, word diff, link both ways", async () => {
    const { context, page } = await open();
    await signIn(page, rootSecret);
    await go(page, `#/ns/acme/e/alice`);
    await page.getByRole("link", { name: "History of: Alice lives in Lyon" }).click();
    await page.getByRole("heading", { name: "History of a memory" }).waitFor();
    const replace = page.locator(".event.kind-REPLACE");
    await replace.waitFor();
    const text = (await replace.textContent()) ?? "";
    expect(text).toContain("REPLACE");
    expect(text).toContain("by root");
    expect(text).toContain("reason:");
    expect(await replace.locator("del").allTextContents()).toEqual(["Paris"]);
    expect(await replace.locator("ins").allTextContents()).toEqual(["Lyon"]);
    await shoot(page, "history-desktop");
    // To the replaced memory, which shows it is no longer current and links back.
    await replace.getByRole("link", { name: "the earlier memory" }).click();
    await page.getByText("This memory is no longer current").waitFor();
    expect(await page.locator(".event").count()).toBe(2); // its ADD and the REPLACE
    await page.getByRole("link", { name: "a newer memory" }).click();
    await page.getByText(`id ${ids.lyonNew}`).waitFor();
    expect(await page.getByText(/^Current · /).count()).toBe(1);
    await context.close();
  }, 60_000);

  test("what changed since a time: the diff as the API returns it", async () => {
    const { context, page } = await open();
    await signIn(page, rootSecret);
    const since = new Date(Math.floor((Date.now() - 3600_000) / 1000) * 1000);
    await go(page, `#/changes/acme/e/alice`);
    const local = new Date(since.getTime() - since.getTimezoneOffset() * 60000).toISOString().slice(0, 19);
    await page.getByLabel("Changes since (your local time)").fill(local);
    await page.getByRole("button", { name: "Show changes" }).click();
    await page.locator(".summary").waitFor();
    const api = (
      await s.json("POST", "/v1/memory/diff", {
        namespace: "acme",
        entity: "alice",
        since: since.toISOString(),
        limit: 200,
      })
    ).body;
    expect(await page.locator(".summary").textContent()).toContain(api.summary);
    expect(await page.getByRole("heading", { name: /^Created/ }).textContent()).toBe(`Created (${api.created.length})`);
    expect(await page.getByRole("heading", { name: /^Replaced/ }).textContent()).toBe(
      `Replaced (${api.replaced.length})`,
    );
    const json = JSON.parse((await page.locator("details pre").textContent()) ?? "");
    expect(json).toEqual(api);
    expect(await unlabelled(page)).toEqual([]);
    await shoot(page, "changes-desktop");
    await context.close();
  }, 60_000);

  test("live: a store made through the API appears within 2 s; the stream's reconnecting sign", async () => {
    const { context, page } = await open();
    await signIn(page, rootSecret);
    // The first two stream requests fail, as a dropped network would: the page says it is reconnecting.
    let refused = 0;
    await page.route("**/v1/memory/events/stream**", async (route) => {
      if (refused++ < 2) return route.abort("connectionreset");
      await page.unroute("**/v1/memory/events/stream**");
      return route.fallback();
    });
    await go(page, `#/ns/acme/e/bob`);
    await page.getByText("1 memory").waitFor();
    await page.getByText("Reconnecting…").waitFor();
    await page.getByText("● Live").waitFor();
    const t0 = performance.now();
    await raw("acme", "bob", "Bob started learning the cello");
    await page.getByText("Bob started learning the cello").waitFor({ timeout: 2000 });
    const ms = performance.now() - t0;
    console.log(`live: store -> on screen in ${ms.toFixed(0)} ms`);
    expect(ms).toBeLessThan(2000);
    await page.getByText("2 memories").waitFor();
    await context.close();
  }, 60_000);

  test("live: the namespaces list shows a new namespace within 2 s", async () => {
    const { context, page } = await open();
    await signIn(page, rootSecret);
    await page.getByText("acme").first().waitFor();
    await page.locator("#live[data-state=live]").waitFor();
    await raw("zz-live", "carol", "Carol joined the team");
    await page.getByRole("link", { name: "zz-live" }).waitFor({ timeout: 2000 });
    // The list was reloaded in place: each namespace once.
    expect(await page.getByRole("link", { name: "acme", exact: true }).count()).toBe(1);
    // A view that cannot be shown leaves nothing of the previous one under its error.
    await go(page, "#/m/not-a-uuid");
    await page.locator("#errors li").first().waitFor();
    expect(await page.locator("main").textContent()).not.toContain("zz-live");
    await context.close();
  }, 60_000);

  test("a read key gets a read-only page: no edit, delete or erase controls", async () => {
    const { context, page } = await open();
    await signIn(page, keys.read.secret);
    expect(await page.locator("#who").textContent()).toContain("read");
    expect(await page.locator("tbody tr").allTextContents()).toEqual([expect.stringContaining("acme")]);
    await go(page, `#/ns/acme/e/alice`);
    await page.getByText("4 memories").waitFor();
    expect(await page.getByRole("button", { name: /Edit|Delete|Erase/ }).count()).toBe(0);
    // A namespace outside the key: the API's 403 message is on screen.
    await go(page, `#/ns/globex`);
    await page.locator("#errors").getByText('this key does not cover namespace "globex"').waitFor();
    await context.close();
  }, 60_000);

  test("delete with confirmation, checked through the API and the audit trail", async () => {
    const { context, page } = await open();
    await signIn(page, keys.write.secret);
    const id = await raw("acme", "carol", "Carol's old phone number is 555-0100");
    await go(page, `#/ns/acme/e/carol`);
    const item = page.locator(`li.memory[data-id="${id}"]`);
    // Cancel first: nothing happens.
    await item.getByRole("button", { name: "Delete" }).click();
    await page.getByRole("dialog").getByRole("button", { name: "Cancel" }).click();
    expect((await s.json("GET", `/v1/memory/${id}`)).status).toBe(200);
    await item.getByRole("button", { name: "Delete" }).click();
    await page.getByRole("dialog").getByRole("button", { name: "Delete" }).click();
    await item.waitFor({ state: "detached" });
    expect((await s.json("GET", `/v1/memory/${id}`)).status).toBe(404);
    const [last] = (await s.json("GET", `/v1/memory/events?memoryId=${id}&limit=1`)).body;
    expect(last).toMatchObject({ event: "DELETE", reason: "deleted", actorKeyId: keys.write.id });
    await context.close();
  }, 60_000);

  test.skipIf(!hasPatch)(
    "edit (PATCH), checked through the API and the audit trail",
    async () => {
      const { context, page } = await open();
      await signIn(page, keys.write.secret);
      const id = await raw("acme", "carol", "Carol works from Lisbon", { category: "location" });
      await go(page, `#/ns/acme/e/carol`);
      await page.locator("#live[data-state=live]").waitFor(); // the stream sees the edit
      const item = page.locator(`li.memory[data-id="${id}"]`);
      await item.getByRole("button", { name: "Edit" }).click();
      await item.getByLabel("Content").fill("Carol works from Porto");
      await item.getByLabel("Tags (comma separated)").fill("work, travel");
      // The item as it is now is marked: the stream's UPDATE re-renders the list (a new item),
      // which happens before or after the PATCH's answer, so the test waits for that state.
      await page.evaluate((id) => {
        (globalThis as any).document.querySelector(`li.memory[data-id="${id}"]`).dataset.before = "1";
      }, id);
      await item.getByRole("button", { name: "Save" }).click();
      await item.getByText("Carol works from Porto").waitFor();
      await page.locator(`li.memory[data-id="${id}"]:not([data-before])`).waitFor();
      // The keyboard is back on the memory's Edit button, not lost to the page, also once the
      // list was made again.
      const focus = () => {
        const active = (globalThis as any).document.activeElement;
        return `${active?.closest("li")?.dataset.id ?? "(no memory)"} ${active?.textContent}`;
      };
      await page
        .waitForFunction(`(${focus})() === ${JSON.stringify(`${id} Edit`)}`, undefined, { timeout: 10_000 })
        .catch(() => {});
      expect(await page.evaluate(focus)).toBe(`${id} Edit`);
      const m = (await s.json("GET", `/v1/memory/${id}`)).body;
      expect(m).toMatchObject({ content: "Carol works from Porto", tags: ["work", "travel"], category: "location" });
      const [last] = (await s.json("GET", `/v1/memory/events?memoryId=${id}&limit=1`)).body;
      expect(last).toMatchObject({
        event: "UPDATE",
        reason: "edited",
        oldContent: "Carol works from Lisbon",
        newContent: "Carol works from Porto",
        actorKeyId: keys.write.id,
      });
      await context.close();
    },
    60_000,
  );

  test.skipIf(!hasErase)(
    "erase (admin), confirmed by typing the entity's name; checked through the API and audit trail",
    async () => {
      const { context, page } = await open();
      await signIn(page, keys.admin.secret);
      await raw("acme", "erin", "Erin's passport number is X123");
      await go(page, `#/ns/acme/e/erin`);
      await page.getByText("1 memory").waitFor();
      await page.getByRole("button", { name: "Erase entity…" }).click();
      const dialog = page.getByRole("dialog");
      const confirm = dialog.getByRole("button", { name: "Erase" });
      expect(await confirm.isDisabled()).toBe(true);
      await dialog.getByLabel("Type erin to confirm").fill("eri");
      expect(await confirm.isDisabled()).toBe(true);
      await dialog.getByLabel("Type erin to confirm").fill("erin");
      // Enter in the field confirms, as the button does (the form's first button is Cancel).
      await dialog.getByLabel("Type erin to confirm").press("Enter");
      await page.getByText("0 memories").waitFor();
      expect(await confirm.isVisible()).toBe(false);
      const list = (await s.json("GET", "/v1/memory?namespace=acme&entity=erin")).body;
      expect(Array.isArray(list) ? list : list.memories).toEqual([]);
      const events = (await s.json("GET", "/v1/memory/events?namespace=acme&entity=erin&limit=100")).body;
      expect(JSON.stringify(events)).not.toContain("X123");
      expect(events.some((e: { reason: string }) => e.reason === "erased")).toBe(true);
      await context.close();
    },
    60_000,
  );

  test("an entity with 1,000 memories and a memory with 500 events render in under 1 s; diff pages", async () => {
    const storage = s.server.core.storage;
    const ops: MemoryOp[] = [];
    for (let i = 0; i < 1000; i++)
      ops.push({
        event: "ADD",
        create: {
          id: Bun.randomUUIDv7(),
          namespace: "bulk",
          entity: "big",
          content: `Fact number ${i}: the customer mentioned item ${i * 7} in a support call`,
          category: ["preference", "location", "work", "note"][i % 4],
          importance: (i % 10) / 10,
          tags: [`t${i % 5}`],
        },
      });
    await storage.apply(ops, "root");
    const target = Bun.randomUUIDv7();
    const history: MemoryOp[] = [
      {
        event: "ADD",
        create: {
          id: target,
          namespace: "bulk",
          entity: "long",
          content: "version 0",
          category: "note",
          importance: 0.5,
        },
      },
    ];
    for (let i = 1; i < 500; i++)
      history.push({
        event: "MERGE",
        target,
        patch: { content: `version ${i} of a fact that keeps changing` },
        reason: "merged",
      });
    await storage.apply(history, "root");

    const { context, page } = await open();
    await signIn(page, rootSecret);
    const timeTo = (hash: string, done: string) =>
      page.evaluate(
        ([h, text]) =>
          new Promise<number>((resolve, reject) => {
            const { document, location, requestAnimationFrame } = globalThis as any;
            const t0 = performance.now();
            location.hash = h;
            const check = () => {
              if (document.querySelector("main")?.textContent?.includes(text)) resolve(performance.now() - t0);
              else if (performance.now() - t0 > 10_000) reject(new Error(`"${text}" did not show within 10 s`));
              else requestAnimationFrame(check);
            };
            check();
          }),
        [hash, done] as const,
      );
    const memoriesMs = await timeTo("#/ns/bulk/e/big", "1000 memories");
    expect(await page.locator(".memory").count()).toBeGreaterThan(0);
    const eventsMs = await timeTo(`#/m/${target}`, "500 events");
    expect(await page.locator(".event").count()).toBeGreaterThan(0);
    console.log(`render: 1,000 memories in ${memoriesMs.toFixed(0)} ms, 500 events in ${eventsMs.toFixed(0)} ms`);
    expect(memoriesMs).toBeLessThan(1000);
    expect(eventsMs).toBeLessThan(1000);
    // All 1,000 reachable with "Show more".
    await go(page, "#/ns/bulk/e/big");
    await page.getByText("1000 memories").waitFor();
    while (await page.getByRole("button", { name: /^Show more/ }).isVisible())
      await page.getByRole("button", { name: /^Show more/ }).click();
    expect(await page.locator(".memory").count()).toBe(1000);
    // The diff of 1,500 events comes in pages of 200, followed with nextSince.
    await go(page, "#/changes/bulk");
    await page.getByLabel("Changes since (your local time)").fill("2000-01-01T00:00:00");
    await page.getByRole("button", { name: "Show changes" }).click();
    await page.getByText(/page 1\)/).waitFor();
    const first = (
      await s.json("POST", "/v1/memory/diff", { namespace: "bulk", since: "2000-01-01T00:00:00.000Z", limit: 200 })
    ).body;
    await page.getByRole("button", { name: "Next page" }).click();
    await page.getByText(/page 2\)/).waitFor();
    const second = (await s.json("POST", "/v1/memory/diff", { namespace: "bulk", since: first.nextSince, limit: 200 }))
      .body;
    expect(JSON.parse((await page.locator("details pre").textContent()) ?? "")).toEqual(second);
    await page.getByRole("button", { name: "Previous page" }).click();
    await page.getByText(/page 1\)/).waitFor();
    await context.close();
  }, 120_000);

  test("at 375 px wide every view fits the screen (no sideways scrolling)", async () => {
    const { context, page } = await open({ width: 375, height: 812 });
    await page.goto(`${s.url}/ui`);
    await page.getByLabel("API key").waitFor();
    await shoot(page, "sign-in-mobile");
    await signIn(page, rootSecret);
    const views: [string, string, string][] = [
      ["namespaces", "#/", "acme"],
      ["entities", "#/ns/acme", "alice"],
      ["memories", "#/ns/acme/e/alice", "4 memories"],
      ["history", `#/m/${ids.lyonNew}`, "REPLACE"],
      ["changes", "#/changes/acme/e/alice", "Show changes"],
    ];
    for (const [name, hash, text] of views) {
      await go(page, hash);
      await page.locator("main").getByText(text, { exact: false }).first().waitFor();
      if (name === "changes") {
        await page.getByLabel("Changes since (your local time)").fill("2000-01-01T00:00:00");
        await page.getByRole("button", { name: "Show changes" }).click();
        await page.locator(".summary").waitFor();
      }
      const width = await page.evaluate(() => (globalThis as any).document.documentElement.scrollWidth);
      expect({ name, width }).toEqual({ name, width: 375 });
      await shoot(page, `${name}-mobile`);
    }
    await context.close();
  }, 60_000);

  test("the page is served with a strict policy; the script is small; nothing left 127.0.0.1; no dialog, no page error", async () => {
    if (launchError) throw launchError;
    const res = await fetch(`${s.url}/ui`);
    const csp = res.headers.get("content-security-policy") ?? "";
    expect(csp).toContain("default-src 'self'");
    expect(csp).toContain("connect-src 'self'");
    expect(csp).not.toContain("unsafe-inline");
    // Anything else under /ui: a 404 with the same policy.
    const missing = await fetch(`${s.url}/ui/nope`);
    expect(missing.status).toBe(404);
    expect(missing.headers.get("content-security-policy")).toBe(csp);
    const html = await res.text();
    expect(html).not.toMatch(/<script(?![^>]*\bsrc=)/); // no inline script
    expect(html).not.toMatch(/<style|style=/);
    expect(html).not.toMatch(/https?:\/\//);
    const js = await (await fetch(`${s.url}/ui/app.js`)).text();
    const gz = Bun.gzipSync(js).length;
    console.log(`page script: ${js.length} bytes, ${gz} bytes gzipped`);
    expect(gz).toBeLessThan(150 * 1024);
    expect(js).not.toContain("innerHTML");
    expect(requested.length).toBeGreaterThan(0);
    const outside = requested.filter((u) => new URL(u).hostname !== "127.0.0.1");
    expect(outside).toEqual([]);
    // The page names its icon, so the browser never asks for a /favicon.ico that is not there.
    expect(requested.filter((u) => new URL(u).pathname === "/favicon.ico")).toEqual([]);
    expect(dialogs).toEqual([]);
    expect(pageErrors).toEqual([]);
  });
});
