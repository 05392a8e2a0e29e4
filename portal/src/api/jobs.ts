// Jobs: the newest, polled while any runs; older ones a page at a time; one job followed
// until it ends; cancelling one or changing its speed limit.
import { skipToken, useInfiniteQuery, useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { ACTIVE } from "../jobs";
import { answer, api, type Job } from "./client";
import { keys } from "./keys";
import type { paths } from "./schema";

/** What a job list asks for (kind, volume, status, limit, ...), as `GET /v1/jobs` takes it. */
export type JobFilter = Omit<NonNullable<paths["/v1/jobs"]["get"]["parameters"]["query"]>, "marker">;

/** Jobs a list shows at first, unless its filter sets `limit`. */
const NEWEST = 100;

/** Recent jobs, polled every 3 s while any runs and the page is visible (TanStack Query
 * stops polling in a hidden tab), every 30 s otherwise. */
export function useJobs(filter: JobFilter = {}) {
  return useQuery({
    queryKey: keys.newestJobs(filter),
    queryFn: () => answer(api.GET("/v1/jobs", { params: { query: { limit: NEWEST, ...filter } } })),
    refetchInterval: (q) => (q.state.data?.jobs.some((j) => ACTIVE.has(j.status)) ? 3_000 : 30_000),
  });
}

/** Jobs older than `anchor` (the newest page's last job when the user first asked), a page
 * at a time; they have ended, so they are read once and not polled. The anchor stays put
 * while new jobs push the newest page along, so the older pages do not jump. */
export function useOlderJobs(anchor: string | null, filter: JobFilter) {
  return useInfiniteQuery({
    queryKey: keys.olderJobs(filter, anchor),
    queryFn: ({ pageParam }) =>
      answer(api.GET("/v1/jobs", { params: { query: { limit: NEWEST, ...filter, marker: pageParam } } })),
    initialPageParam: anchor ?? "",
    getNextPageParam: (last) => last.next_marker ?? undefined,
    enabled: anchor !== null,
  });
}

/** One job, polled every 2 s until it ends (nothing when `jobId` is undefined). */
export function useJob(jobId: string | undefined) {
  return useQuery({
    queryKey: keys.job(jobId),
    queryFn: jobId ? () => answer(api.GET("/v1/jobs/{job_id}", { params: { path: { job_id: jobId } } })) : skipToken,
    refetchInterval: (q) => (q.state.data && !ACTIVE.has(q.state.data.status) ? false : 2_000),
  });
}

/** Cancels a running job; the job's page shows the answer at once. */
export function useCancelJob(jobId: string) {
  const client = useQueryClient();
  return useMutation({
    mutationFn: () => answer(api.POST("/v1/jobs/{job_id}/cancel", { params: { path: { job_id: jobId } } })),
    onSuccess: (job: Job) => client.setQueryData(keys.job(jobId), job),
  });
}

/** Sets a running job's speed limit in bytes a second (null: none). */
export function useLimitJob(jobId: string) {
  const client = useQueryClient();
  return useMutation({
    mutationFn: (bytesPerSecond: number | null) =>
      answer(
        api.PATCH("/v1/jobs/{job_id}", {
          params: { path: { job_id: jobId } },
          body: { qos_bytes_per_second: bytesPerSecond },
        }),
      ),
    onSuccess: (job: Job) => client.setQueryData(keys.job(jobId), job),
  });
}
