import { useEffect, useState } from "react";
import { useCancelJob, useJob, useLimitJob } from "../api/jobs";
import { can, useSession } from "../api/session";
import { ErrorNote } from "../components/ErrorNote";
import { Progress } from "../components/Progress";
import { RateChart } from "../components/RateChart";
import { confirmed } from "../confirm";
import { bytes, duration, rate, volumeDetail, volumeLabel, when } from "../format";
import { ACTIVE, eta } from "../jobs";
import { Link } from "../router";

const MiB = 1024 * 1024;

export function JobDetail({ jobId }: { jobId: string }) {
  const { data: session } = useSession();
  const job = useJob(jobId);
  const [samples, setSamples] = useState<{ t: number; rate: number }[]>([]);
  const [limit, setLimit] = useState("");
  const data = job.data;
  useEffect(() => {
    if (data && data.status === "running") {
      const value = data.progress.rate_bytes_per_second ?? 0;
      setSamples((old) => [...old.slice(-300), { t: Date.now(), rate: value }]);
    }
  }, [data]);
  const cancel = useCancelJob(jobId);
  const qos = useLimitJob(jobId);
  if (!data) return <ErrorNote error={job.error} />;
  const left = eta(data);
  const active = ACTIVE.has(data.status);
  return (
    <section>
      <header className="page-head">
        <h2>
          <Link to="/jobs">Jobs</Link> / {data.kind} {data.id.slice(0, 8)}
        </h2>
        <span className={`tag tag-${data.status}`}>{data.status}</span>
      </header>
      <div className="cards">
        <div className="card wide">
          <Progress job={data} />
          <div className="small">
            {bytes(data.progress.bytes_done)} of {bytes(data.progress.bytes_total)}
            {left !== null && ` · ${duration(left)} left`}
          </div>
        </div>
        <div className="card">
          <div className="figure">{rate(data.progress.rate_bytes_per_second ?? data.average_bytes_per_second)}</div>
          <div>{active ? "now" : "on average"}</div>
        </div>
        {data.load && (
          <div className="card">
            <div className="figure">{data.load.bottleneck}</div>
            <div className="small">{data.load.summary}</div>
          </div>
        )}
      </div>
      {active && <RateChart samples={samples} />}
      {data.error && (
        <p className="error" role="alert">
          {data.error.message} <span className="muted">({data.error.code})</span>
        </p>
      )}
      <table className="facts">
        <tbody>
          <tr><th>Volume</th><td>{volumeLabel(data)}{volumeDetail(data) && <span className="muted small"> ({volumeDetail(data)})</span>}</td></tr>
          <tr><th>Target</th><td>{data.target ?? "–"}</td></tr>
          <tr><th>Queued</th><td>{when(data.timings.created_at)}</td></tr>
          <tr><th>Started</th><td>{when(data.timings.started_at)}</td></tr>
          {data.timings.ready_at && <tr><th>Usable</th><td>{when(data.timings.ready_at)}</td></tr>}
          <tr><th>Finished</th><td>{when(data.timings.finished_at)}</td></tr>
          <tr><th>Took</th><td>{duration(data.timings.duration_seconds)}</td></tr>
          <tr><th>QoS</th><td>{data.qos.bytes_per_second ? rate(data.qos.bytes_per_second) : "no limit"}</td></tr>
          {data.restore_volume_id && <tr><th>Restored into</th><td>{data.restore_volume_id}</td></tr>}
          {data.summary && <tr><th>Summary</th><td>{data.summary}</td></tr>}
        </tbody>
      </table>
      {active && (
        <div className="row">
          {can(session, "job:update") && (
            <>
              <input
                type="number"
                min={1}
                placeholder="MiB/s"
                aria-label="Limit (MiB/s)"
                value={limit}
                onChange={(e) => setLimit(e.target.value)}
              />
              <button type="button" disabled={qos.isPending} onClick={() => qos.mutate(limit ? Math.round(Number(limit) * MiB) : null)}>
                {limit ? "Limit" : "Remove limit"}
              </button>
            </>
          )}
          {can(session, "job:cancel") && (
            <button
              type="button"
              className="danger"
              disabled={cancel.isPending || data.cancel_requested}
              onClick={() => confirmed(`Cancel this ${data.kind}? What it made so far is removed.`) && cancel.mutate()}
            >
              {data.cancel_requested ? "Cancelling…" : "Cancel"}
            </button>
          )}
        </div>
      )}
      <ErrorNote error={cancel.error ?? qos.error} />
    </section>
  );
}
