import { afterEach, describe, expect, it } from "vitest";
import { answer, ApiError, createApi, setCsrf, whenSignedOut } from "./client";

/** A client whose fetch answers `reply` and keeps the requests it was sent. */
function clientAnswering(reply: (request: Request) => Response | Promise<Response>) {
  const sent: Request[] = [];
  const client = createApi({
    baseUrl: "http://cairn.test",
    fetch: async (request: Request) => {
      sent.push(request);
      return reply(request);
    },
  });
  return { client, sent };
}

const json = (status: number, body: unknown) =>
  new Response(JSON.stringify(body), { status, headers: { "Content-Type": "application/json" } });

afterEach(() => {
  setCsrf(null);
  whenSignedOut(() => undefined);
});

describe("the API client", () => {
  it("sends the session cookie, and the CSRF token with changes only", async () => {
    setCsrf("token-1");
    const { client, sent } = clientAnswering(() => json(200, { jobs: [], next_marker: null }));
    await answer(client.GET("/v1/jobs", { params: { query: { limit: 100, kind: "backup" } } }));
    await answer(client.POST("/v1/backups", { body: { volume: "v1", kind: "full" } }));
    const [read, change] = sent;
    expect(read?.url).toBe("http://cairn.test/v1/jobs?limit=100&kind=backup");
    expect(read?.credentials).toBe("same-origin");
    expect(read?.headers.get("Accept")).toBe("application/json");
    expect(read?.headers.get("X-CSRF-Token")).toBeNull();
    expect(read?.headers.get("Content-Type")).toBeNull();
    expect(change?.headers.get("X-CSRF-Token")).toBe("token-1");
    expect(change?.headers.get("Content-Type")).toBe("application/json");
    expect(await change?.json()).toEqual({ volume: "v1", kind: "full" });
  });

  it("answers with the API's body, and nothing for a 204", async () => {
    const job = { id: "j1", status: "queued" };
    const { client } = clientAnswering((request) => (request.method === "DELETE" ? new Response(null, { status: 204 }) : json(202, job)));
    expect(await answer(client.POST("/v1/jobs/{job_id}/cancel", { params: { path: { job_id: "j1" } } }))).toEqual(job);
    expect(await answer(client.DELETE("/v1/plans/{plan_id}", { params: { path: { plan_id: "p1" } } }))).toBeUndefined();
  });

  it("throws the API's own message, or says what answered when there is none", async () => {
    const { client } = clientAnswering((request) =>
      request.url.endsWith("/locked")
        ? json(409, { error: { code: "restore_point_locked", message: "The restore point is locked until 2027-01-01" } })
        : new Response("<html>Bad Gateway</html>", { status: 502 }),
    );
    const locked = answer(client.DELETE("/v1/restore-points/{restore_point_id}", { params: { path: { restore_point_id: "locked" } } }));
    await expect(locked).rejects.toEqual(new ApiError(409, "restore_point_locked", "The restore point is locked until 2027-01-01"));
    await expect(locked).rejects.toMatchObject({ status: 409, code: "restore_point_locked" });
    const proxy = answer(client.GET("/v1/overview"));
    await expect(proxy).rejects.toMatchObject({ status: 502, code: "error", message: "Cairn answered 502" });
  });

  it("signs out on a 401 from any call but the session's own", async () => {
    let signedOut = 0;
    whenSignedOut(() => (signedOut += 1));
    const { client } = clientAnswering(() => json(401, { error: { code: "unauthorized", message: "The token expired" } }));
    await expect(answer(client.GET("/v1/session"))).rejects.toMatchObject({ status: 401 });
    await expect(answer(client.POST("/v1/session", { body: { project_id: "p" } }))).rejects.toMatchObject({ status: 401 });
    expect(signedOut).toBe(0);
    await expect(answer(client.GET("/v1/volumes"))).rejects.toMatchObject({ status: 401, message: "The token expired" });
    expect(signedOut).toBe(1);
  });

  it("says Cairn could not be reached when the request never got an answer", async () => {
    const { client } = clientAnswering(() => Promise.reject(new TypeError("Failed to fetch")));
    await expect(answer(client.GET("/v1/usage"))).rejects.toEqual(
      new ApiError(0, "unreachable", "Cairn could not be reached; check your connection"),
    );
  });
});
