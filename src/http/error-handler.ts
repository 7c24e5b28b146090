import { Elysia, ValidationError } from "elysia";
import type { Logger } from "../log";
import { StorageError } from "../storage/storage";
import { ApiError } from "../wire/errors";
import { detailsInWords, type FailedCheck } from "./validation-words";

/** Maps anything thrown to an ApiError; unknown errors become a bare 500 and go to the log. */
export function toApiError(code: string | number, error: unknown, logger: Logger): ApiError {
  if (error instanceof ApiError) return error;
  const cause = (error as { cause?: unknown })?.cause;
  if (cause instanceof ApiError) return cause;
  if (error instanceof StorageError) return new ApiError(error.code, error.message);
  if (error instanceof ValidationError || code === "VALIDATION") {
    const found = detailsInWords(((error as ValidationError).all ?? []) as FailedCheck[]);
    // Elysia leaves `all` undefined for some query shapes (a repeated parameter that fails).
    const details = found.length ? found : [{ field: "(request)", message: "does not match the schema" }];
    const where = error instanceof ValidationError && error.type !== "body" ? ` ${error.type}` : "";
    return new ApiError(
      "invalid_request",
      `invalid request${where}: ${details.map((d) => `${d.field}: ${d.message}`).join("; ")}`,
      details,
    );
  }
  if (code === "NOT_FOUND") return new ApiError("not_found", "no such route");
  if (code === "PARSE") return new ApiError("invalid_request", "the body is not valid JSON");
  logger.error("unhandled error", { error: String((error as Error)?.stack ?? error) });
  return new ApiError("internal", "internal error");
}

/** An error body of another API that memd speaks on some paths (see src/mem0). */
export interface ErrorShape {
  paths: (path: string) => boolean;
  body: (e: ApiError) => unknown;
}

/**
 * The single onError hook: every error body is {"error": {code, message, details?}}, except on
 * the paths of a `shapes` entry, whose body it is (same status, same message).
 */
export const errorHandler = (logger: Logger, shapes: ErrorShape[] = []) =>
  new Elysia({ name: "error-handler" })
    .error({ ApiError })
    .onError({ as: "global" }, ({ code, error, set, request }) => {
      const e = toApiError(code, error, logger);
      set.status = e.status;
      if (e.headers) Object.assign(set.headers, e.headers);
      set.headers["content-type"] = "application/json";
      if (shapes.length) {
        const path = new URL(request.url).pathname;
        const shape = shapes.find((s) => s.paths(path));
        if (shape) return shape.body(e);
      }
      return e.toBody();
    });
