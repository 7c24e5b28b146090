// Debian's Chromium for the browser tests, started as this machine needs it (headless, no
// sandbox as root, no background networking: the closed network refuses those connections).
import { existsSync } from "node:fs";
import { type Browser, chromium } from "playwright-core";

export const chromiumPath = "/usr/bin/chromium";

/** Starts Chromium (each launch with a fresh temporary profile); an Error says why it could not. */
export async function launchChromium(): Promise<Browser | Error> {
  if (!existsSync(chromiumPath))
    return new Error(`${chromiumPath} is missing: install it with apt-get install -y chromium (make browser-deps)`);
  try {
    return await chromium.launch({
      executablePath: chromiumPath,
      args: [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
      ],
      timeout: 60_000,
    });
  } catch (e) {
    return new Error(`Chromium (${chromiumPath}) could not be started: ${(e as Error).message}`);
  }
}
