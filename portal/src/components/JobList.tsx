import { useState } from "react";
import { useJobs, useOlderJobs, type JobFilter } from "../api/jobs";
import { ErrorNote } from "./ErrorNote";
import { JobTable } from "./JobTable";

const NO_FILTER: JobFilter = {};

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
