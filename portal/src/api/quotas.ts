// The project's storage and restore points against its quota; any project's, and setting
// it, for the cloud's administrators.
import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { answer, api, type Schemas } from "./client";
import { keys, useInvalidate } from "./keys";

export type Quota = Schemas["ProjectQuotaPublic"];

export function useUsage() {
  return useQuery({ queryKey: keys.usage, queryFn: () => answer(api.GET("/v1/usage")) });
}

/** Any project's quota and usage (nothing while `projectId` is empty). */
export function useQuota(projectId: string) {
  return useQuery({
    queryKey: keys.quota(projectId),
    queryFn: () => answer(api.GET("/v1/quotas/{project_id}", { params: { path: { project_id: projectId } } })),
    enabled: !!projectId,
  });
}

/** Sets a project's limits (null: no limit). */
export function useSetQuota(projectId: string) {
  const client = useQueryClient();
  const invalidate = useInvalidate();
  return useMutation({
    mutationFn: (limits: Schemas["QuotaLimits"]) =>
      answer(api.PUT("/v1/quotas/{project_id}", { params: { path: { project_id: projectId } }, body: limits })),
    onSuccess: (saved) => {
      client.setQueryData(keys.quota(projectId), saved);
      invalidate(keys.usage);
    },
  });
}
