// The API as the page uses it: the key from session storage as a Bearer header, no cookies;
// every error answer becomes an ApiError with the server's code and message.

import type {
  AuditEvent,
  ConsolidateResponse,
  DiffResponse,
  Memory as GenMemory,
  Permission,
  RestoreResponse,
  RevertResponse,
} from "../../client/src/types.gen";

const keyName = "memd.key";

export const session = {
  get: () => sessionStorage.getItem(keyName),
  set: (key: string) => sessionStorage.setItem(keyName, key),
  clear: () => sessionStorage.removeItem(keyName),
};

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

/** Reads an error answer: memd's {"error": {code, message}} or, failing that, the status line. */
export async function errorOf(res: Response): Promise<ApiError> {
  let code = `http_${res.status}`;
  let message = res.statusText || "request failed";
  try {
    const body = await res.json();
    if (body?.error?.message) {
      code = String(body.error.code);
      message = String(body.error.message);
      const details = body.error.details as { field: string; message: string }[] | undefined;
      if (details?.length && !details.every((d) => message.includes(d.message)))
        message += ` (${details.map((d) => `${d.field}: ${d.message}`).join("; ")})`;
    }
  } catch {
    // not JSON: keep the status line
  }
  return new ApiError(res.status, code, message);
}

export function authHeaders(extra: Record<string, string> = {}): Record<string, string> {
  const key = session.get();
  return key ? { ...extra, authorization: `Bearer ${key}` } : extra;
}

/** Calls the API; resolves with the JSON answer or rejects with an ApiError. */
export async function api<T>(method: string, path: string, body?: unknown): Promise<T> {
  let res: Response;
  try {
    res = await fetch(path, {
      method,
      credentials: "omit",
      cache: "no-store",
      headers: authHeaders(body === undefined ? {} : { "content-type": "application/json" }),
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch (e) {
    throw new ApiError(0, "network_error", `the server could not be reached: ${(e as Error).message}`);
  }
  if (!res.ok) throw await errorOf(res);
  const text = await res.text();
  return (text ? JSON.parse(text) : undefined) as T;
}

/** Builds a query string from the defined values. */
export function qs(params: Record<string, string | number | undefined | null>): string {
  const u = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== "") u.set(k, String(v));
  const s = u.toString();
  return s ? `?${s}` : "";
}

export interface Me {
  id: string;
  name: string;
  permission: Permission;
  namespaces: string[];
}
/** A memory as the list and search answers show it (`score` on search results only). */
export type Memory = GenMemory & { score?: number };
export type { AuditEvent, ConsolidateResponse, RestoreResponse, RevertResponse };
export type Diff = DiffResponse;
