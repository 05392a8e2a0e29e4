import { useJobs } from "../api/jobs";
import { useOverview } from "../api/overview";
import { useUsage } from "../api/quotas";
import { ErrorNote } from "../components/ErrorNote";
import { JobTable } from "../components/JobTable";
import { Meter } from "../components/Meter";
import { ago, duration, when } from "../format";
import { ACTIVE } from "../jobs";
import { Link } from "../router";

const DAY_MS = 86_400_000;

/** What needs attention first: unprotected volumes, volumes behind their plan, failures;
 * then what runs now and next, and the storage used against the quota. */
export function Overview() {
  const overview = useOverview();
  const usage = useUsage();
  const jobs = useJobs();
  const summary = overview.data;
  const recent = (jobs.data?.jobs ?? []).filter(
    (j) => Date.now() - new Date(j.timings.created_at).getTime() < DAY_MS,
  );
  const count = (status: string) => recent.filter((j) => j.status === status).length;
  const running = recent.filter((j) => ACTIVE.has(j.status));
  const failed = recent.filter((j) => j.status === "failed");
  return (
    <section>
      <header className="page-head">
        <h2>Overview</h2>
      </header>
      <ErrorNote error={overview.error ?? jobs.error ?? usage.error} />
      <div className="cards">
        {summary?.protected != null && (
          <div className="card">
            <div className="figure">{summary.protected}</div>
            <div>protected volumes</div>
          </div>
        )}
        {summary?.unprotected != null && (
          <div className={`card ${summary.unprotected ? "warn" : ""}`}>
            <div className="figure">{summary.unprotected}</div>
            <div>
              <Link to="/volumes?unprotected">unprotected volumes</Link>
            </div>
          </div>
        )}
        {summary && (
          <div className={`card ${summary.stale.length ? "warn" : ""}`}>
            <div className="figure">{summary.stale.length}</div>
            <div>behind their plan</div>
          </div>
        )}
        <div className="card">
          <div className="figure">{count("succeeded")}</div>
          <div>jobs succeeded (24 h)</div>
        </div>
        <div className={`card ${failed.length ? "bad" : ""}`}>
          <div className="figure">{failed.length}</div>
          <div>jobs failed (24 h)</div>
        </div>
        <div className="card">
          <div className="figure">{running.length}</div>
          <div>running or queued</div>
        </div>
        {usage.data && (
          <div className="card wide">
            <div>Stored</div>
            <Meter used={usage.data.usage.gigabytes_stored} limit={usage.data.limits.gigabytes} unit="GiB" />
            <Meter used={usage.data.usage.restore_points} limit={usage.data.limits.restore_points} unit="restore points" />
          </div>
        )}
      </div>
      {summary && summary.stale.length > 0 && (
        <>
          <h3>Behind their plan</h3>
          <table className="stale">
            <thead>
              <tr>
                <th>Volume</th>
                <th>Newest restore point</th>
                <th>Plan</th>
                <th>Runs every</th>
              </tr>
            </thead>
            <tbody>
              {summary.stale.map((s) => (
                <tr key={s.volume} data-stale={s.volume}>
                  <td>
                    {/^[0-9a-f-]{36}$/.test(s.volume) ? <Link to={`/volumes/${s.volume}`}>{s.name || s.volume}</Link> : s.volume}
                  </td>
                  <td title={when(s.newest_at)}>
                    <span className="tag tag-warning">{s.newest_at ? ago(s.newest_at) : "never"}</span>
                  </td>
                  <td>{s.plan_name}</td>
                  <td>{duration(s.interval_seconds)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </>
      )}
      {failed.length > 0 && (
        <>
          <h3>Recent failures</h3>
          <JobTable jobs={failed} />
        </>
      )}
      {running.length > 0 && (
        <>
          <h3>Running</h3>
          <JobTable jobs={running} />
        </>
      )}
      {summary && summary.next_runs.length > 0 && (
        <>
          <h3>Next runs</h3>
          <ol className="next-runs">
            {summary.next_runs.map((r) => (
              <li key={`${r.plan_id}-${r.at}`}>
                {when(r.at)} <span className="muted">({ago(r.at)})</span> · {r.plan_name}: {r.kind} of {r.volumes}{" "}
                volume{r.volumes === 1 ? "" : "s"} <span className="muted small">{r.timezone}</span>
              </li>
            ))}
          </ol>
        </>
      )}
    </section>
  );
}
