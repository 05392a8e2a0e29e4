import { useState } from "react";
import type { Job } from "../api/client";
import { useJobs, useOlderJobs, type JobFilter } from "../api/jobs";
import { ErrorNote } from "../components/ErrorNote";
import { Progress } from "../components/Progress";
import { bytes, duration, when } from "../format";
import { Link } from "../router";

const NO_FILTER: JobFilter = {};

export function Jobs() {
  return (
    <section>
      <header className="page-head">
        <h2>Jobs</h2>
      </header>
      <JobList />
    </section>
  );
}

/** The newest jobs matching `filter` (`limit` among them sets the page), polled while any
 * runs, then older pages on "Show more". */
export function JobList({ filter = NO_FILTER }: { filter?: JobFilter }) {
  // The newest page is polled (running jobs move); older ones are read when asked for.
  const jobs = useJobs(filter);
  const [anchor, setAnchor] = useState<string | null>(null);
  const older = useOlderJobs(anchor, filter);
  const newest = jobs.data?.jobs ?? [];
  const seen = new Set(newest.map((j) => j.id));
  const shown = [...newest, ...(older.data?.pages.flatMap((page) => page.jobs) ?? []).filter((j) => !seen.has(j.id))];
  const more = anchor === null ? !!jobs.data?.next_marker : older.hasNextPage;
  return (
    <>
      <ErrorNote error={jobs.error ?? older.error} />
      {jobs.data && shown.length === 0 && <p className="muted">No jobs yet.</p>}
      {shown.length > 0 && <JobTable jobs={shown} />}
      {more && (
        <button
          type="button"
          className="show-more"
          aria-label="Show more jobs"
          disabled={older.isFetching}
          onClick={() => (anchor === null ? setAnchor(jobs.data?.next_marker ?? null) : older.fetchNextPage())}
        >
          {older.isFetching ? "Loading…" : "Show more"}
        </button>
      )}
    </>
  );
}

export function JobTable({ jobs }: { jobs: Job[] }) {
  return (
    <table>
      <thead>
        <tr>
          <th>Kind</th>
          <th>Volume</th>
          <th>Status</th>
          <th>Progress</th>
          <th>Copied</th>
          <th>Started</th>
          <th>Took</th>
        </tr>
      </thead>
      <tbody>
        {jobs.map((job) => (
          <tr key={job.id} data-job={job.id}>
            <td>
              <Link to={`/jobs/${job.id}`}>{job.kind}</Link>
            </td>
            <td className="small">{job.volume ?? "–"}</td>
            <td>
              <span className={`tag tag-${job.status}`}>{job.status}</span>
              {job.error && <div className="error small">{job.error.message}</div>}
            </td>
            <td>
              <Progress job={job} />
            </td>
            <td>{bytes(job.progress.bytes_written || job.progress.bytes_done)}</td>
            <td>{when(job.timings.started_at ?? job.timings.created_at)}</td>
            <td>{duration(job.timings.duration_seconds)}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}
