// The project's protection at a glance (GET /v1/overview).
import { useQuery } from "@tanstack/react-query";
import { answer, api } from "./client";
import { keys } from "./keys";

/** Protected and unprotected volumes, those behind their plan, the next runs. */
export function useOverview() {
  return useQuery({ queryKey: keys.overview, queryFn: () => answer(api.GET("/v1/overview")), refetchInterval: 30_000 });
}
