// Who is signed in, into which project, and what they may do. The session itself lives
// in an HttpOnly cookie the API sets; the page only ever sees this description of it.
import { QueryClient, useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { api, ApiError, setCsrf, type Schemas, type Session } from "./api/client";

export const SESSION_KEY = ["session"];
/** What the last sign-out said when it could not end everything (Keystone kept the
 * tokens, or not every Cairn process heard of it): the sign-in page shows it. */
export const SIGNED_OUT_NOTE_KEY = ["signed-out-note"];

/** Forget every other project's or user's data, keeping the session query itself (its
 * observers stay attached: clearing the whole cache would leave the screen behind). */
function startOver(client: QueryClient, session: Session | null) {
  client.removeQueries({
    predicate: (q) => q.queryKey[0] !== SESSION_KEY[0] && q.queryKey[0] !== SIGNED_OUT_NOTE_KEY[0],
  });
  client.setQueryData(SESSION_KEY, session);
}

export function useSession() {
  return useQuery({
    queryKey: SESSION_KEY,
    queryFn: async () => {
      try {
        const session = await api<Session>("GET", "/v1/session");
        setCsrf(session.csrf_token);
        return session;
      } catch (error) {
        if (error instanceof ApiError && error.status === 401) return null;
        throw error;
      }
    },
    staleTime: 60_000,
    retry: false,
  });
}

export type SignInForm = {
  domain?: string;
  username?: string;
  password?: string;
  project_id?: string;
};

export function useSignIn() {
  const client = useQueryClient();
  return useMutation({
    mutationFn: (form: SignInForm) => api<Session>("POST", "/v1/session", form),
    onSuccess: (session) => {
      setCsrf(session.csrf_token);
      startOver(client, session);
    },
  });
}

export function useSwitchProject() {
  const client = useQueryClient();
  return useMutation({
    mutationFn: (projectId: string) =>
      api<Session>("PUT", "/v1/session/project", { project_id: projectId }),
    onSuccess: (session) => {
      setCsrf(session.csrf_token);
      startOver(client, session); // nothing of the other project's may linger on screen
    },
  });
}

export function useSignOut() {
  const client = useQueryClient();
  return useMutation({
    mutationFn: () => api<Schemas["SignedOut"]>("DELETE", "/v1/session"),
    onSuccess: (result) => {
      const complete = result.tokens_revoked && result.ended_everywhere;
      client.setQueryData(SIGNED_OUT_NOTE_KEY, complete ? null : result.message);
    },
    onSettled: () => {
      setCsrf(null);
      startOver(client, null);
    },
  });
}

/** Whether the session's policy allows `action` (`backup:create`, ...): what it does not
 * allow is not shown. The API decides again on every request. */
export function can(session: Session | null | undefined, action: string): boolean {
  return !!session && session.allowed.includes(action);
}
