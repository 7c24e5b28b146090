import { Elysia } from "elysia";
// biome-ignore format: the import attributes embed the files as text, in the binary too
import css from "../../ui/app.css" with { type: "text" };
import { pageScript } from "./bundle";

/**
 * Sent with every /ui answer: scripts and styles only from this server's own files (no inline
 * code, so injected markup could not run even if some ever reached the page), fetches only to
 * this server, no framing, no referrer.
 */
export const contentSecurityPolicy = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self'",
  "connect-src 'self'",
  "font-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join("; ");

// The page itself: a frame the script fills. No inline script or style (the policy forbids them).
const html = `<!doctype html>
<html lang="en">
  <head>
    <meta charset="utf-8" />
    <meta name="viewport" content="width=device-width, initial-scale=1" />
    <meta name="referrer" content="no-referrer" />
    <title>memd</title>
    <link rel="stylesheet" href="/ui/app.css" />
    <link rel="icon" href="/ui/icon.svg" type="image/svg+xml" />
    <script type="module" src="/ui/app.js"></script>
  </head>
  <body>
    <header class="top">
      <a class="brand" href="#/">memd</a>
      <nav id="crumbs" aria-label="Breadcrumb"></nav>
      <span id="live" role="status" aria-live="polite" data-state="off"></span>
      <div id="who"></div>
    </header>
    <ul id="errors" role="alert" aria-label="Errors"></ul>
    <main id="main" tabindex="-1"><p>Loading…</p></main>
    <noscript>This page needs JavaScript. The API is described at <a href="/docs">/docs</a>.</noscript>
  </body>
</html>
`;

const headers = (type: string) => ({
  "content-type": type,
  "content-security-policy": contentSecurityPolicy,
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "x-frame-options": "DENY",
  "cache-control": "no-cache",
});

const page = () => new Response(html, { headers: headers("text/html; charset=utf-8") });

// The tab's icon, so that the browser does not ask for /favicon.ico (a 404 in its console).
const icon = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16"><rect width="16" height="16" rx="3" fill="#2f3b52"/><path d="M4 12V4l4 5 4-5v8" fill="none" stroke="#fff" stroke-width="1.6"/></svg>`;

/** Anything else under /ui: a 404 in the API's shape, with the page's headers (its policy too). */
const notFound = () =>
  new Response(JSON.stringify({ error: { code: "not_found", message: "no such file under /ui" } }), {
    status: 404,
    headers: headers("application/json"),
  });

/**
 * The web page at /ui: a static page and its script and styles, all embedded at build time. It
 * needs no key to load; it asks for one and calls the API like any client.
 */
export const uiRoutes = () =>
  new Elysia({ name: "ui" })
    // The server's root, where a person types its address: the page.
    .get("/", () => new Response(null, { status: 302, headers: { location: "/ui" } }), { detail: { hide: true } })
    .get("/ui", page, { detail: { hide: true } })
    .get("/ui/", page, { detail: { hide: true } })
    .get(
      "/ui/app.js",
      async () => new Response(await pageScript(), { headers: headers("text/javascript; charset=utf-8") }),
      { detail: { hide: true } },
    )
    .get("/ui/app.css", () => new Response(css, { headers: headers("text/css; charset=utf-8") }), {
      detail: { hide: true },
    })
    .get("/ui/icon.svg", () => new Response(icon, { headers: headers("image/svg+xml") }), { detail: { hide: true } })
    .get("/ui/*", notFound, { detail: { hide: true } });
