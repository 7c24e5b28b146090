import { expect, test } from "bun:test";
import { toApiError } from "../../src/http/error-handler";
import { createLogger } from "../../src/log";
import { ApiError, errorCatalogue } from "../../src/wire/errors";

test("an unknown error becomes a bare 500 internal; its details go only to the log", () => {
  const lines: string[] = [];
  const e = toApiError(
    "UNKNOWN",
    new Error("db exploded at /srv/memd/src/x.ts:12"),
    createLogger("info", (l) => lines.push(l)),
  );
  expect(e.status).toBe(500);
  expect(e.toBody()).toEqual({ error: { code: "internal", message: "internal error" } });
  expect(lines.join("")).toContain("db exploded");
});

test("every catalogue code fixes its status", () => {
  for (const [code, status] of Object.entries(errorCatalogue))
    expect(new ApiError(code as keyof typeof errorCatalogue, "m").status).toBe(status);
  expect(errorCatalogue).toMatchObject({
    invalid_request: 400,
    unauthorized: 401,
    forbidden: 403,
    not_found: 404,
    payload_too_large: 413,
    unsupported_media_type: 415,
    rate_limited: 429,
    internal: 500,
    llm_upstream_error: 502,
    llm_bad_output: 502,
    llm_timeout: 504,
  });
});
