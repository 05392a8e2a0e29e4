// Who is signed in, into which project, and what they may do. The session itself lives
// in an HttpOnly cookie the API sets; the page only ever sees this description of it.
import { QueryClient, useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { answer, api, ApiError, setCsrf, type Schemas, type Session } from "./client";
import { keys } from "./keys";

/** Forget every other project's or user's data, keeping the session query itself (its
 * observers stay attached: clearing the whole cache would leave the screen behind). */
function startOver(client: QueryClient, session: Session | null) {
  client.removeQueries({
    predicate: (q) => q.queryKey[0] !== keys.session[0] && q.queryKey[0] !== keys.signedOutNote[0],
  });
  client.setQueryData(keys.session, session);
}

export function useSession() {
  return useQuery({
    queryKey: keys.session,
    queryFn: async () => {
      try {
        const session = await answer(api.GET("/v1/session"));
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

/** How this deployment signs in: Keystone's domain, user and password, or (noauth) a
 * project alone. */
export function useSignInOptions() {
  return useQuery({ queryKey: keys.signInOptions, queryFn: () => answer(api.GET("/v1/session/options")) });
}

export function useSignIn() {
  const client = useQueryClient();
  return useMutation({
    mutationFn: (form: Schemas["SignIn"]) => answer(api.POST("/v1/session", { body: form })),
    onSuccess: (session) => {
      setCsrf(session.csrf_token);
      startOver(client, session);
    },
  });
}

export function useSwitchProject() {
  const client = useQueryClient();
  return useMutation({
    mutationFn: (projectId: string) => answer(api.PUT("/v1/session/project", { body: { project_id: projectId } })),
    onSuccess: (session) => {
      setCsrf(session.csrf_token);
      startOver(client, session); // nothing of the other project's may linger on screen
    },
  });
}

export function useSignOut() {
  const client = useQueryClient();
  return useMutation({
    mutationFn: () => answer(api.DELETE("/v1/session")),
    onSuccess: (result) => {
      const complete = result.tokens_revoked && result.ended_everywhere;
      client.setQueryData(keys.signedOutNote, complete ? null : result.message);
    },
    onSettled: () => {
      setCsrf(null);
      startOver(client, null);
    },
  });
}

/** What the last sign-out said when it could not end everything, if anything. */
export function useSignedOutNote(): string | null | undefined {
  return useQueryClient().getQueryData<string | null>(keys.signedOutNote);
}

/** Whether the session's policy allows `action` (`backup:create`, ...): what it does not
 * allow is not shown. The API decides again on every request. */
export function can(session: Session | null | undefined, action: string): boolean {
  return !!session && session.allowed.includes(action);
}
