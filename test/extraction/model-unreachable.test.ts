// @targets lmdb postgres binary
// A configured model that cannot be reached: 502, and a log line naming host and cause, never the API key.
import { expect, test } from "bun:test";
import { startTestServer } from "../helpers";

test("a model that cannot be reached: the log names host and cause, never the key", async () => {
  const t = await startTestServer({
    env: { MEMD_LLM_BASE_URL: "http://127.0.0.1:1/v1", MEMD_LLM_MODEL: "m", MEMD_LLM_API_KEY: "sk-never-logged-123" },
  });
  try {
    const r = await t.json("POST", "/v1/memory", { namespace: "n", entity: "u", content: "I like tea" });
    expect(r.status).toBe(502);
    await t.settleLogs();
    const line = t.logs.find((l) => l.includes('"model call failed"'));
    expect(JSON.parse(line!)).toMatchObject({ level: "warn", cause: "127.0.0.1:1: connection refused" });
    expect(t.logs.join("\n")).not.toContain("sk-never-logged-123");
  } finally {
    await t.stop();
  }
});
