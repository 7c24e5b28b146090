// In-process only (never against the binary): it closes the server's store under it.
import { expect, test } from "bun:test";
import { startTestServer } from "../helpers";

test("/readyz answers 503 with an error body once the store is closed", async () => {
  const p = await startTestServer();
  try {
    await p.server.core.storage.close();
    const r = await p.json("GET", "/readyz", undefined, { key: null });
    expect(r.status).toBe(503);
    expect(r.body.error.code).toBe("not_ready");
    expect((await p.json("GET", "/healthz", undefined, { key: null })).status).toBe(200);
  } finally {
    await p.server.core.storage.close().catch(() => {});
    await p.server.stop().catch(() => {});
  }
});
