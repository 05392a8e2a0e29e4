import type { Job } from "./api/client";

/** A job in one of these states has not ended: lists poll faster while one is shown. */
export const ACTIVE = new Set(["queued", "running"]);

/** Seconds left at the current rate, or null when it cannot be told. */
export function eta(job: Job): number | null {
  const p = job.progress;
  const speed = p.rate_bytes_per_second || p.throughput_bytes_per_second;
  if (!ACTIVE.has(job.status) || !p.bytes_total || !speed) return null;
  return Math.max(0, (p.bytes_total - p.bytes_done) / speed);
}
