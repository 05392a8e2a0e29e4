// The API as the portal calls it: same origin, the session cookie sent by the browser
// (never a token in script), the CSRF token on every change, the API's own message on
// every error. Every call names an operation of the API's OpenAPI document (`paths` in
// schema.d.ts, generated from openapi.json), so tsc checks its method, path, parameters,
// body and answer (contract.check.ts shows it refusing wrong ones).
import createClient, { type ClientOptions, type Middleware } from "openapi-fetch";
import type { components, paths } from "./schema";

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

/** What every call does around fetch: the CSRF token on a change, and any failure thrown
 * as an ApiError carrying the message the screens show. */
const session: Middleware = {
  onRequest({ request }) {
    if (request.method !== "GET" && csrfToken) request.headers.set("X-CSRF-Token", csrfToken);
    return undefined;
  },
  onError() {
    return new ApiError(0, "unreachable", "Cairn could not be reached; check your connection");
  },
  async onResponse({ response, schemaPath }) {
    if (response.ok) return undefined;
    const text = await response.text();
    const error = (safeJson(text) as { error?: { code?: string; message?: string } } | undefined)?.error;
    // A refused sign-in or session call is the sign-in form's to show, not a sign-out.
    if (response.status === 401 && !schemaPath.startsWith("/v1/session")) onSignedOut();
    throw new ApiError(response.status, error?.code ?? "error", error?.message ?? `Cairn answered ${response.status}`);
  },
};

/** A client of the API; `options` only for tests (another address, a stand-in fetch). */
export function createApi(options: ClientOptions = {}) {
  const client = createClient<paths>({ credentials: "same-origin", headers: { Accept: "application/json" }, ...options });
  client.use(session);
  return client;
}

export const api = createApi();

/** The answer of a call. A failed call never gets here: the middleware threw it. */
export async function answer<T>(call: Promise<{ data?: T; response: Response }>): Promise<T> {
  return (await call).data as T;
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
