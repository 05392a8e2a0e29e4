// A volume's restore points: the list, the calendar of their days, and what a user does to
// one (restore, verify, lock, delete).
import { useInfiniteQuery, useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { answer, api, type Job, type Schemas } from "./client";
import { keys, useInvalidate } from "./keys";

export type RestorePoint = Schemas["RestorePointPublic"];

/** The volume's restore points a page at a time (newest first; `Show more` reads the next
 * page by its marker), so a volume with thousands of them opens as fast as one with ten. */
export function useRestorePoints(volumeId: string, size: number, live: boolean) {
  return useInfiniteQuery({
    queryKey: keys.restorePointPages(volumeId, size),
    queryFn: ({ pageParam }) =>
      answer(
        api.GET("/v1/restore-points", {
          params: { query: { volume: volumeId, limit: size, ...(pageParam ? { marker: pageParam } : {}) } },
        }),
      ),
    initialPageParam: "",
    getNextPageParam: (last) => last.next_marker ?? undefined,
    // Every loaded page is read again at each refresh: often only while one of the
    // volume's jobs runs (a backup adds one, a prune removes some).
    refetchInterval: live ? 5_000 : 30_000,
  });
}

/** How many restore points of each kind the volume has per day of `timezone`, over the
 * last `days` days. */
export function useRestorePointDays(volumeId: string, timezone: string, days: number) {
  return useQuery({
    queryKey: keys.restorePointDays(volumeId),
    queryFn: () => answer(api.GET("/v1/restore-points/days", { params: { query: { volume: volumeId, timezone, days } } })),
    refetchInterval: 30_000,
  });
}

/** One change to a restore point, asked for from its row. */
export type PointChange =
  | { point: RestorePoint; kind: "verify" }
  | { point: RestorePoint; kind: "lock"; until: string | null }
  | { point: RestorePoint; kind: "delete" };

/** What the API answered: the job a verify or a delete started, the locked restore point. */
export type PointChanged = { kind: "verify" | "delete"; job: Job } | { kind: "lock"; point: RestorePoint };

async function change(c: PointChange): Promise<PointChanged> {
  const path = { params: { path: { restore_point_id: c.point.id } } };
  switch (c.kind) {
    case "verify":
      return { kind: c.kind, job: await answer(api.POST("/v1/restore-points/{restore_point_id}/verify", { ...path, body: {} })) };
    case "lock":
      return { kind: c.kind, point: await answer(api.PATCH("/v1/restore-points/{restore_point_id}", { ...path, body: { locked_until: c.until } })) };
    case "delete":
      return { kind: c.kind, job: await answer(api.DELETE("/v1/restore-points/{restore_point_id}", path)) };
  }
}

/** The callbacks of the table that asks for changes: several rows may wait at once, so
 * each is told which change it was. */
type ChangeCallbacks = {
  onMutate?: (c: PointChange) => void;
  onError?: (error: Error, c: PointChange) => void;
  onSettled?: (c: PointChange) => void;
  onSuccess?: (answer: PointChanged, c: PointChange) => void;
};

/** One mutation for a whole table of restore points (see PointTable). A verify's job is
 * followed from its answer on, so its button stays off until the job's first read. */
export function useChangeRestorePoint(callbacks: ChangeCallbacks = {}) {
  const client = useQueryClient();
  const invalidate = useInvalidate();
  return useMutation<PointChanged, Error, PointChange>({
    mutationFn: change,
    onMutate: (c) => callbacks.onMutate?.(c),
    onError: (error, c) => callbacks.onError?.(error, c),
    onSettled: (_answer, _error, c) => callbacks.onSettled?.(c),
    onSuccess: (changed, c) => {
      if (changed.kind === "verify") client.setQueryData(keys.job(changed.job.id), changed.job);
      invalidate(keys.restorePoints, keys.jobs);
      callbacks.onSuccess?.(changed, c);
    },
  });
}

/** Restores a restore point (into a new volume, a new RBD image, or over its volume). */
export function useRestore(pointId: string) {
  const invalidate = useInvalidate();
  return useMutation({
    mutationFn: (where: Schemas["RestoreCreate"]) =>
      answer(api.POST("/v1/restore-points/{restore_point_id}/restore", { params: { path: { restore_point_id: pointId } }, body: where })),
    onSuccess: () => invalidate(keys.jobs),
  });
}

/** Copies a restore point to another target (off-site); the copy is a restore point of its
 * own once the job is over. */
export function useCopy(pointId: string) {
  const invalidate = useInvalidate();
  return useMutation({
    mutationFn: (body: Schemas["CopyCreate"]) =>
      answer(api.POST("/v1/restore-points/{restore_point_id}/copy", { params: { path: { restore_point_id: pointId } }, body })),
    onSuccess: () => invalidate(keys.jobs, keys.restorePoints),
  });
}

/** A plan's restore point group (its volumes at one instant), read while it is shown. */
export function useRestorePointGroup(groupId: string) {
  return useQuery({
    queryKey: keys.restorePointGroup(groupId),
    queryFn: () => answer(api.GET("/v1/restore-point-groups/{group_id}", { params: { path: { group_id: groupId } } })),
  });
}

/** Restores every volume of a group at once (new volumes or images, or each in place). */
export function useGroupRestore(groupId: string) {
  const invalidate = useInvalidate();
  return useMutation({
    mutationFn: (body: Schemas["GroupRestoreCreate"]) =>
      answer(api.POST("/v1/restore-point-groups/{group_id}/restore", { params: { path: { group_id: groupId } }, body })),
    onSuccess: () => invalidate(keys.jobs),
  });
}
