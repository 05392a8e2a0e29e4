import { ErrorNote } from "../components/ErrorNote";
import { ACTIVE, useJobs } from "../jobs";
import { Link } from "../router";
import { JobTable } from "./Jobs";
import { useVolumes } from "./Volumes";

const DAY_MS = 86_400_000;

export function Overview() {
  const volumes = useVolumes();
  const jobs = useJobs();
  const all = volumes.data?.volumes ?? [];
  const unprotected = all.filter((v) => !v.protected).length;
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
      <ErrorNote error={volumes.error ?? jobs.error} />
      <div className="cards">
        <div className="card">
          <div className="figure">{all.length - unprotected}</div>
          <div>protected volumes</div>
        </div>
        <div className={`card ${unprotected ? "warn" : ""}`}>
          <div className="figure">{unprotected}</div>
          <div>
            <Link to="/volumes?unprotected">unprotected volumes</Link>
          </div>
        </div>
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
      </div>
      {running.length > 0 && (
        <>
          <h3>Running</h3>
          <JobTable jobs={running} />
        </>
      )}
      {failed.length > 0 && (
        <>
          <h3>Recent failures</h3>
          <JobTable jobs={failed} />
        </>
      )}
    </section>
  );
}
