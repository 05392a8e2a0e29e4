import { useQuery } from "@tanstack/react-query";
import { api, type Job, type Schemas } from "./api/client";

export const ACTIVE = new Set(["queued", "running"]);

/** Recent jobs, polled every 3 s while any runs and the page is visible (TanStack Query
 * stops polling in a hidden tab), every 30 s otherwise. */
export function useJobs(params: Record<string, string> = {}) {
  const query = new URLSearchParams({ limit: "100", ...params });
  return useQuery({
    queryKey: ["jobs", params],
    queryFn: () => api<Schemas["JobList"]>("GET", `/v1/jobs?${query}`),
    refetchInterval: (q) =>
      q.state.data?.jobs.some((j) => ACTIVE.has(j.status)) ? 3_000 : 30_000,
  });
}

/** Seconds left at the current rate, or null when it cannot be told. */
export function eta(job: Job): number | null {
  const p = job.progress;
  const speed = p.rate_bytes_per_second || p.throughput_bytes_per_second;
  if (!ACTIVE.has(job.status) || !p.bytes_total || !speed) return null;
  return Math.max(0, (p.bytes_total - p.bytes_done) / speed);
}

/** One job, polled every 2 s until it ends (nothing when `id` is undefined). */
export function useJob(id: string | undefined) {
  return useQuery({
    queryKey: ["job", id],
    queryFn: () => api<Job>("GET", `/v1/jobs/${id}`),
    enabled: !!id,
    refetchInterval: (q) => (q.state.data && !ACTIVE.has(q.state.data.status) ? false : 2_000),
  });
}
