// The API reference page at /docs in a real browser (Debian's Chromium, playwright-core), clicked
// through as a person would: an operation, its test-request panel (a request sent), search, the
// client libraries, the document download, dark mode. Every request the page makes is routed here:
// any that is not for this server (127.0.0.1) is recorded and aborted, and there must be none.
// The features of the reference UI that call its vendor ("Ask AI", "Generate MCP", the dashboard
// toolbar) are not on the page, and its Content-Security-Policy refuses any other connection.
// If Chromium cannot start, the tests fail saying why; none is skipped.
import { afterAll, beforeAll, expect, test } from "bun:test";
import type { Browser, Page } from "playwright-core";
import { launchChromium } from "../chromium";
import { startTestServer, type TestServer } from "../helpers";

let s: TestServer;
let browser: Browser | undefined;
let launchError: Error | undefined;

beforeAll(async () => {
  s = await startTestServer();
  const launched = await launchChromium();
  if (launched instanceof Error) launchError = launched;
  else browser = launched;
});
afterAll(async () => {
  await browser?.close();
  await s.stop();
});

/** A page whose every request is seen: those for this server go on, any other is recorded and aborted. */
async function open() {
  if (launchError) throw launchError;
  const context = await browser!.newContext({ viewport: { width: 1280, height: 860 }, serviceWorkers: "block" });
  const seen: string[] = [];
  const outside: string[] = [];
  const problems: string[] = [];
  await context.route("**/*", (route) => {
    const url = route.request().url();
    seen.push(`${route.request().method()} ${url}`);
    if (new URL(url).host === new URL(s.url).host) return route.continue();
    outside.push(url);
    return route.abort("blockedbyclient");
  });
  context.on("websocket" as never, (ws: { url(): string }) => outside.push(ws.url()));
  const page = await context.newPage();
  page.setDefaultTimeout(30_000);
  page.on("pageerror", (e) => problems.push(String(e)));
  page.on("console", (m) => {
    // "Failed to load resource" is the browser's note on the 401 the panel's request gets.
    if (m.type() === "error" && !/Failed to load resource/.test(m.text())) problems.push(m.text());
  });
  return { context, page, seen, outside, problems };
}

const vendorFeatures = [/Ask AI/i, /Generate MCP/i, /Developer Tools/i, /^Share$/, /^Deploy$/, /Configure/];

async function expectNoVendorFeatures(page: Page) {
  const controls = (await page.locator("button, a, [role=button]").allInnerTexts()).map((t) => t.trim());
  expect(controls.length).toBeGreaterThan(20);
  for (const name of vendorFeatures)
    expect({ name: String(name), found: controls.filter((t) => name.test(t)) }).toEqual({
      name: String(name),
      found: [],
    });
}

test("/docs sends a policy that allows no outside connection", async () => {
  for (const path of ["/docs", "/docs/scalar.js"]) {
    const res = await fetch(s.url + path);
    await res.arrayBuffer();
    const csp = res.headers.get("content-security-policy") ?? "";
    for (const directive of ["default-src 'self'", "connect-src 'self'", "script-src 'self'", "frame-src 'none'"])
      expect({ path, directive, there: csp.includes(directive) }).toEqual({ path, directive, there: true });
    expect(csp).not.toMatch(/https?:|\*/);
  }
});

test("clicked through, the page makes no request but to this server, and offers nothing of the vendor's", async () => {
  const { context, page, seen, outside, problems } = await open();
  try {
    await page.goto(`${s.url}/docs`);
    // The sidebar: groups (tags) of short labels.
    const store = page.getByRole("link", { name: /^Store\b/ }).first();
    await store.waitFor();
    for (const group of ["search", "keys", "ops", "mem0"])
      await page
        .getByRole("button", { name: `Open Group - ${group}` })
        .first()
        .waitFor();
    await expectNoVendorFeatures(page);

    // The document's download, made in the page.
    const [download] = await Promise.all([
      page.waitForEvent("download"),
      page.getByText("Download OpenAPI Document", { exact: true }).filter({ visible: true }).first().click(),
    ]);
    expect(download.suggestedFilename()).toMatch(/\.json$/);

    // An operation, then its test-request panel, and a request sent from it.
    await store.click();
    await page.getByRole("heading", { name: "Store", exact: true }).first().waitFor();
    await page
      .getByRole("button", { name: /Test Request.*post \/v1\/memory\)/ })
      .first()
      .click();
    const send = page.getByRole("button", { name: /Send post request to \/v1\/memory/ }).first();
    await send.waitFor();
    const sent = page.waitForRequest((r) => r.method() === "POST" && r.url() === `${s.url}/v1/memory`);
    await send.click();
    await sent;
    // memd's answer (401: the panel has no key) shows in the panel.
    await page.getByText("401", { exact: false }).first().waitFor();
    await page.getByRole("button", { name: "Close Client" }).first().click();

    // Search: an operation found by a word of its summary, and opened.
    await page
      .getByRole("button", { name: /Open Search/ })
      .first()
      .click();
    await page.keyboard.type("erasures");
    const hit = page.getByRole("option", { name: /List erasures/ }).first();
    await hit.click();
    await page.waitForURL(/#.*erasures/i);
    await page
      .getByRole("heading", { name: /List erasures/ })
      .first()
      .waitFor();

    // Another client library's example, dark mode.
    await page
      .getByRole("tab", { name: /Python/ })
      .first()
      .click();
    await page
      .getByRole("button", { name: /dark mode|light mode/i })
      .first()
      .click();
    await expectNoVendorFeatures(page);

    // The policy holds in the browser: a connection to another origin (a loopback one, so
    // nothing leaves even if it did not) is refused before it is made.
    const refused = await page.evaluate(async () => {
      // This runs in the page; the test's own types know no DOM.
      const win = globalThis as unknown as { document: EventTarget };
      const violation = new Promise<string>((resolve) =>
        win.document.addEventListener(
          "securitypolicyviolation",
          (e) => resolve((e as Event & { effectiveDirective: string }).effectiveDirective),
          { once: true },
        ),
      );
      const fetched = await fetch("http://127.0.0.2:9/").then(
        () => "fetched",
        () => "failed",
      );
      return `${fetched} ${await violation}`;
    });
    expect(refused).toBe("failed connect-src");

    expect(outside).toEqual([]);
    expect(seen.length).toBeGreaterThan(3);
    expect(seen.every((r) => r.split(" ")[1].startsWith(`${s.url}/`))).toBe(true);
    // The one refusal is the one this test provoked; the page itself broke no rule.
    expect(problems.filter((p) => !p.includes("127.0.0.2"))).toEqual([]);
  } catch (e) {
    await page.screenshot({ path: "/tmp/nc-docs-fail.png" }).catch(() => {});
    throw e;
  } finally {
    await context.close();
  }
}, 120_000);
