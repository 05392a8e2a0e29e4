// The backup targets a project may write to (the off-site copy's and the plan's choices).
import { useQuery } from "@tanstack/react-query";
import { answer, api, type Schemas } from "./client";
import { keys } from "./keys";

export type Target = Schemas["TargetPublic"];

/** Which targets there are changes only with Cairn's configuration: read once. */
export function useTargets(enabled = true) {
  return useQuery({
    queryKey: keys.targets,
    queryFn: () => answer(api.GET("/v1/targets")),
    staleTime: Infinity,
    enabled,
  });
}
