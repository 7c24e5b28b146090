/**
 * The one catalogue of error codes. Each code fixes its HTTP status; handlers throw ApiError
 * and a single onError hook (see error-handler.ts) shapes the body:
 *   {"error": {"code": "...", "message": "...", "details"?: [...]}}
 */
export const errorCatalogue = {
  invalid_request: 400,
  unauthorized: 401,
  forbidden: 403,
  not_found: 404,
  method_not_allowed: 405,
  payload_too_large: 413,
  unsupported_media_type: 415,
  idempotency_key_reused: 422,
  // Keyed facts, revert and restore (issue 33): the key is held by another current memory, or
  // the memory changed meanwhile (409); the content asked for was erased (410).
  conflict: 409,
  erased: 410,
  rate_limited: 429,
  internal: 500,
  llm_upstream_error: 502,
  llm_bad_output: 502,
  extraction_unavailable: 503,
  embedding_unavailable: 503,
  not_ready: 503,
  shutting_down: 503,
  llm_timeout: 504,
  storage_unavailable: 503,
  outcome_unknown: 503,
  storage_full: 507,
} as const;

export type ErrorCode = keyof typeof errorCatalogue;

export interface ErrorDetail {
  field: string;
  message: string;
}

export class ApiError extends Error {
  readonly status: number;
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly details?: ErrorDetail[],
    readonly headers?: Record<string, string>,
  ) {
    super(message);
    this.status = errorCatalogue[code];
  }

  toBody() {
    return { error: { code: this.code, message: this.message, ...(this.details ? { details: this.details } : {}) } };
  }
}

/** A 400 naming one field. */
export const invalidField = (field: string, message: string) =>
  new ApiError("invalid_request", `${field}: ${message}`, [{ field, message }]);
