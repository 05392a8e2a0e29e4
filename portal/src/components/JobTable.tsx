import type { Job } from "../api/client";
import { bytes, duration, volumeDetail, volumeLabel, when } from "../format";
import { Link } from "../router";
import { Progress } from "./Progress";

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
            <td className="small">
              {volumeLabel(job)}
              {volumeDetail(job) && <div className="muted">{volumeDetail(job)}</div>}
            </td>
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
