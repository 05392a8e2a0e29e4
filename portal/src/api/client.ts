// The API as the portal calls it: same origin, the session cookie sent by the browser
// (never a token in script), the CSRF token on every change, the API's own message on
// every error.
import type { components } from "./schema";

export type Schemas = components["schemas"];
export type Session = Schemas["SessionPublic"];
export type Volume = Schemas["VolumePublic"];
export type Job = Schemas["JobPublic"];

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

let csrfToken: string | null = null;
let onSignedOut: () => void = () => undefined;

/** What to do when the API says the session is over (expired or revoked token): the
 * portal shows the sign-in form rather than an error on every screen. */
export function whenSignedOut(handler: () => void): void {
  onSignedOut = handler;
}

/** The session's CSRF token, set when the session is read or made. */
export function setCsrf(token: string | null): void {
  csrfToken = token;
}

export async function api<T>(method: string, path: string, body?: unknown): Promise<T> {
  const headers: Record<string, string> = { Accept: "application/json" };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  if (method !== "GET" && csrfToken) headers["X-CSRF-Token"] = csrfToken;
  let response: Response;
  try {
    response = await fetch(path, {
      method,
      headers,
      credentials: "same-origin",
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch {
    throw new ApiError(0, "unreachable", "Cairn could not be reached; check your connection");
  }
  if (response.status === 204) return undefined as T;
  const text = await response.text();
  const data: unknown = text ? safeJson(text) : undefined;
  if (!response.ok) {
    const error = (data as { error?: { code?: string; message?: string } } | undefined)?.error;
    if (response.status === 401 && !path.startsWith("/v1/session")) onSignedOut();
    throw new ApiError(
      response.status,
      error?.code ?? "error",
      error?.message ?? `Cairn answered ${response.status}`,
    );
  }
  return data as T;
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
