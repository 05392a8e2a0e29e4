import { useState, type FormEvent } from "react";
import { useQuota, useSetQuota, useUsage, type Quota } from "../api/quotas";
import { can, useSession } from "../api/session";
import { ErrorNote } from "../components/ErrorNote";
import { Meter } from "../components/Meter";

/** The project's restore points and stored gigabytes against its quota; the cloud's
 * administrators look up any project and set its quota. */
export function Usage() {
  const { data: session } = useSession();
  const own = useUsage();
  return (
    <section>
      <header className="page-head">
        <h2>Usage and quota</h2>
      </header>
      <ErrorNote error={own.error} />
      {own.data && <QuotaTable quota={own.data} />}
      {can(session, "quota:update") && <AdminQuota />}
    </section>
  );
}

function QuotaTable({ quota }: { quota: Quota }) {
  return (
    <table className="facts">
      <tbody>
        <tr>
          <th>Project</th>
          <td>{quota.project_id}</td>
        </tr>
        <tr>
          <th>Restore points</th>
          <td>
            <Meter used={quota.usage.restore_points} limit={quota.limits.restore_points} unit="restore points" />
          </td>
        </tr>
        <tr>
          <th>Stored</th>
          <td>
            <Meter used={quota.usage.gigabytes_stored} limit={quota.limits.gigabytes} unit="GiB" />
          </td>
        </tr>
      </tbody>
    </table>
  );
}

function AdminQuota() {
  const [project, setProject] = useState("");
  const [asked, setAsked] = useState("");
  const [limits, setLimits] = useState({ restore_points: "", gigabytes: "" });
  const quota = useQuota(asked);
  const save = useSetQuota(asked);
  const look = (event: FormEvent) => {
    event.preventDefault();
    setAsked(project.trim());
  };
  return (
    <>
      <h3>Any project (administrators)</h3>
      <form className="row" onSubmit={look}>
        <input aria-label="Project id" placeholder="project id" value={project} onChange={(e) => setProject(e.target.value)} />
        <button type="submit">Show</button>
      </form>
      <ErrorNote error={quota.error} />
      {quota.data && (
        <>
          <QuotaTable quota={quota.data} />
          <form
            className="row"
            onSubmit={(e) => {
              e.preventDefault();
              save.mutate({
                restore_points: limits.restore_points === "" ? null : Number(limits.restore_points),
                gigabytes: limits.gigabytes === "" ? null : Number(limits.gigabytes),
              });
            }}
          >
            <input type="number" min={0} aria-label="Restore point limit" placeholder="restore points (empty: no limit)" value={limits.restore_points} onChange={(e) => setLimits({ ...limits, restore_points: e.target.value })} />
            <input type="number" min={0} step="any" aria-label="Gigabyte limit" placeholder="GiB (empty: no limit)" value={limits.gigabytes} onChange={(e) => setLimits({ ...limits, gigabytes: e.target.value })} />
            <button type="submit" disabled={save.isPending}>
              Set quota
            </button>
          </form>
          <ErrorNote error={save.error} />
        </>
      )}
    </>
  );
}
