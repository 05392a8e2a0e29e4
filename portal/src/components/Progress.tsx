import type { Job } from "../api/client";
import { duration, rate } from "../format";
import { eta } from "../jobs";

export function Progress({ job }: { job: Job }) {
  const percent = job.status === "succeeded" ? 100 : Math.floor(job.progress.percent ?? 0);
  const left = eta(job);
  return (
    <div className="progress-cell">
      <div
        className={`progress progress-${job.status}`}
        role="progressbar"
        aria-valuemin={0}
        aria-valuemax={100}
        aria-valuenow={percent}
        aria-label={`${job.kind} ${job.status}`}
      >
        <div className="bar" style={{ width: `${percent}%` }} />
      </div>
      <span className="muted">
        {percent} %{job.status === "running" && ` · ${rate(job.progress.rate_bytes_per_second)}`}
        {left !== null && ` · ${duration(left)} left`}
      </span>
    </div>
  );
}
