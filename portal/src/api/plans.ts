// Plans: the list, the editor's live preview, saving one, and what the list's buttons do.
import { useMutation, useQuery } from "@tanstack/react-query";
import { answer, api, type Schemas } from "./client";
import { keys, useInvalidate } from "./keys";

export type Plan = Schemas["PlanPublic"];

/** The project's plans; `enabled: false` until they are needed (the volume list asks only
 * once volumes are selected to be added to one). */
export function usePlans(enabled = true) {
  return useQuery({
    queryKey: keys.plans,
    queryFn: () => answer(api.GET("/v1/plans", { params: { query: { limit: 1000 } } })),
    enabled,
  });
}

/** What a draft of a plan would do (its rules in words, next runs, what its retention
 * keeps), checked exactly as a save is. `draft` is the draft as JSON: the key of its answer. */
export function usePlanPreview(draft: string) {
  return useQuery({
    queryKey: keys.planPreview(draft),
    queryFn: () => answer(api.POST("/v1/plans/preview", { body: JSON.parse(draft) as Schemas["PlanDraft"] })),
    retry: false,
    placeholderData: (previous) => previous,
  });
}

/** Saves a new plan, or changes `plan` (a PATCH of what the editor holds). */
export function useSavePlan(plan: Plan | undefined) {
  const invalidate = useInvalidate();
  return useMutation({
    mutationFn: (body: Schemas["PlanCreate"]) =>
      plan
        ? answer(api.PATCH("/v1/plans/{plan_id}", { params: { path: { plan_id: plan.id } }, body }))
        : answer(api.POST("/v1/plans", { body })),
    onSuccess: () => invalidate(keys.plans, keys.volumes, keys.overview),
  });
}

/** Sets a plan's volumes, the list whole (adding some sends the plan's own and the new ones). */
export function useSetPlanVolumes() {
  const invalidate = useInvalidate();
  return useMutation({
    mutationFn: ({ planId, volumes }: { planId: string; volumes: string[] }) =>
      answer(api.PATCH("/v1/plans/{plan_id}", { params: { path: { plan_id: planId } }, body: { volumes } })),
    onSuccess: () => invalidate(keys.plans, keys.volumes),
  });
}

export type PlanAction = "run" | "pause" | "resume" | "delete";

async function act(plan: Plan, action: PlanAction): Promise<void> {
  const path = { params: { path: { plan_id: plan.id } } };
  switch (action) {
    case "run":
      await answer(api.POST("/v1/plans/{plan_id}/run", { ...path, body: {} }));
      return;
    case "pause":
      await answer(api.POST("/v1/plans/{plan_id}/pause", path));
      return;
    case "resume":
      await answer(api.POST("/v1/plans/{plan_id}/resume", path));
      return;
    case "delete":
      await answer(api.DELETE("/v1/plans/{plan_id}", path));
      return;
  }
}

/** Run now, pause, resume or delete a plan; whatever it did shows on every list. */
export function usePlanAction() {
  const invalidate = useInvalidate();
  return useMutation({
    mutationFn: ({ plan, action }: { plan: Plan; action: PlanAction }) => act(plan, action),
    onSuccess: () => invalidate(keys.plans, keys.jobs, keys.volumes, keys.overview),
  });
}
